package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

type linkList []nodecheck.Link

func (l linkList) Links() ([]nodecheck.Link, error) { return l, nil }

// A node whose kernel sender on the bridge has tx checksum offload on: doctor names the
// sender, the fix and why, and shows OVS's userspace TSO setting, while the node keeps its
// vhost-user label (the checks as the agent makes them; the cluster side is kubectl-fstack/test/envtest).
func TestDoctorExplainsKernelTCPChecksum(t *testing.T) {
	facts := &nodecheck.BridgeFacts{KernelPorts: []string{"fsk-node-o"}}
	links := linkList{{Index: 7, Name: "fsk-node-o", Kind: "veth", PeerIndex: 8}, {Index: 8, Name: "fsk-node", Kind: "veth", PeerIndex: 7, TxChecksum: true}}
	r := &nodecheck.Report{
		Checks: []nodecheck.Check{
			{Name: "ovs-bridge", Status: nodecheck.Pass, Detail: `bridge "br-fstack", datapath netdev`, Label: fsv1.NodeLabelVhostUser},
			nodecheck.KernelTCP(facts, links), nodecheck.UserspaceTSO(facts),
		},
		Labels: map[string]string{fsv1.NodeLabelVhostUser: fsv1.NodeReady},
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: r.Labels,
		Annotations: map[string]string{fsv1.NodeReportAnnotation: r.Marshal()}}}
	var out bytes.Buffer
	printNodeReport(&out, n)
	for _, want := range []string{
		"node node-a: 1 of 3 checks need attention",
		"labels: node.kubefstack.io/vhost-user=ready",
		"WARN     kernel-tcp-checksum   tx checksum offload on: fsk-node (peer of port fsk-node-o)",
		"PASS     ovs-userspace-tso     other_config:userspace-tso-enable=false (unset)",
		"fix kernel-tcp-checksum: tx checksum offload on: fsk-node (peer of port fsk-node-o): ethtool -K <sender> tx off for fsk-node",
		"gets every SYN with a bad checksum and drops it",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "fix ovs-userspace-tso") {
		t.Errorf("information got a fix line:\n%s", out.String())
	}
}

// printNodeReport prints n's table as doctor does when no StackInstance exists.
func printNodeReport(w io.Writer, n *corev1.Node) {
	if err := buildDoctorReport(doctorInput{nodes: []corev1.Node{*n}}).writeTable(w, doctorTable{}); err != nil {
		panic(err)
	}
}

// demoNode is the demo's node as the node agent reports it: 2Mi pages, the static CPU manager,
// the seccomp profile and OVS-DPDK are there; 1Gi pages and vfio are not. The demo stack (a
// vhost-user port, 2Mi pages) runs there.
func demoNode() *corev1.Node {
	r := &nodecheck.Report{
		Checks: []nodecheck.Check{
			{Name: "hugepages-2Mi", Status: nodecheck.Pass, Detail: "1024 total, 900 free", Label: fsv1.NodeLabelHugePages("2Mi")},
			{Name: "hugepages-1Gi", Status: nodecheck.Fail, Detail: "0 total, 0 free", Fix: "reserve with hugepagesz=1G hugepages=N", Label: fsv1.NodeLabelHugePages("1Gi")},
			{Name: "cpu-manager", Status: nodecheck.Pass, Detail: "policy static", Label: fsv1.NodeLabelCPUManager},
			{Name: "seccomp-profile", Status: nodecheck.Pass, Detail: "installed", Label: fsv1.NodeLabelSeccomp},
			{Name: "ovs-bridge", Status: nodecheck.Pass, Detail: `bridge "br-fstack", datapath netdev`, Label: fsv1.NodeLabelVhostUser},
			{Name: "vfio", Status: nodecheck.Fail, Detail: "no IOMMU groups", Fix: "enable the IOMMU (intel_iommu=on) and load vfio-pci", Label: fsv1.NodeLabelVFIO},
			{Name: "aslr", Status: nodecheck.Warn, Detail: "kernel.randomize_va_space = 2", Label: fsv1.NodeLabelASLR},
		},
		Labels: map[string]string{
			fsv1.NodeLabelHugePages("2Mi"): fsv1.NodeReady, fsv1.NodeLabelCPUManager: fsv1.NodeCPUManagerStatic,
			fsv1.NodeLabelSeccomp: fsv1.NodeReady, fsv1.NodeLabelVhostUser: fsv1.NodeReady, fsv1.NodeLabelASLR: "on",
		},
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "demo", Labels: r.Labels,
		Annotations: map[string]string{fsv1.NodeReportAnnotation: r.Marshal()}}}
}

func stackPod(ns, stack, node string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stack + "-0", Labels: map[string]string{fsv1.StackLabel: stack}},
		Spec: corev1.PodSpec{NodeName: node}}
}

func namedStack(t *testing.T, sample, ns, name string) fsv1.StackInstance {
	si := fixtures.Stack(t, sample)
	si.Namespace, si.Name = ns, name
	return *si
}

// The demo node's two FAILs (1Gi pages, vfio) are needed by no stack: doctor says so, names the
// stack that needs each passing check, and exits 0 (today it printed two alarming FAILs).
func TestDoctorFailNobodyNeedsIsNotAlarming(t *testing.T) {
	in := doctorInput{nodes: []corev1.Node{*demoNode()},
		stacks: []fsv1.StackInstance{namedStack(t, "vhost-user", "web", "demo")},
		pods:   []corev1.Pod{stackPod("web", "demo", "demo")}}
	r := buildDoctorReport(in)
	if len(r.Problems) != 0 {
		t.Errorf("problems %q on a node where the demo stack runs", r.Problems)
	}
	var out bytes.Buffer
	if err := r.writeTable(&out, doctorTable{}); err != nil {
		t.Fatal(err)
	}
	lines := out.String()
	for _, re := range []string{
		`node demo: 1 of 7 checks need attention \(2 more failed, needed by no StackInstance\)`,
		`FAIL +hugepages-1Gi +0 total, 0 free +not needed\n`,
		`FAIL +vfio +no IOMMU groups +not needed\n`,
		`PASS +hugepages-2Mi +1024 total, 900 free +needed by web/demo\n`,
		`PASS +ovs-bridge +.* +needed by web/demo\n`,
		`WARN +aslr +kernel.randomize_va_space = 2 +-\n`,
		`fix vfio: no IOMMU groups: enable the IOMMU \(intel_iommu=on\) and load vfio-pci \(not needed by any StackInstance\)`,
	} {
		if !regexp.MustCompile(re).MatchString(lines) {
			t.Errorf("doctor output does not match %q:\n%s", re, lines)
		}
	}
	if strings.Contains(lines, "cannot run") {
		t.Errorf("the demo stack can run on the demo node:\n%s", lines)
	}
}

// A stack naming a PCI function by address needs vfio: with its pod on the demo node doctor
// names it beside the vfio check and exits 1; named by another node, only that node's stacks
// count; with no node named, a stack no node can run is a problem even without a pod.
func TestDoctorExitsNonZeroOnlyForAStackThatCannotRun(t *testing.T) {
	pci := namedStack(t, "sriov", "net", "pci")
	pci.Spec.Ports[0].Device = fsv1.PortDevice{PCI: &fsv1.PCIDevice{Address: "0000:3b:02.0"}}
	stacks := []fsv1.StackInstance{namedStack(t, "vhost-user", "web", "demo"), pci}

	onDemo := buildDoctorReport(doctorInput{nodes: []corev1.Node{*demoNode()}, named: true, stacks: stacks,
		pods: []corev1.Pod{stackPod("web", "demo", "demo"), stackPod("net", "pci", "demo")}})
	if len(onDemo.Problems) != 1 || !strings.Contains(onDemo.Problems[0], "StackInstance net/pci has a pod on node demo, which lacks node.kubefstack.io/vfio=ready") {
		t.Errorf("problems %q; want net/pci lacking vfio on demo", onDemo.Problems)
	}
	var out bytes.Buffer
	if err := onDemo.writeTable(&out, doctorTable{wide: true}); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`FAIL +vfio +no IOMMU groups +needed by net/pci +node.kubefstack.io/vfio\n`,
		`FAIL +hugepages-1Gi +0 total, 0 free +not needed +node.kubefstack.io/hugepages-1Gi\n`,
		`cannot run: net/pci \(lacks node.kubefstack.io/vfio=ready\)`,
		`node demo: 2 of 7 checks need attention \(1 more failed`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("doctor -o wide does not match %q:\n%s", re, out.String())
		}
	}

	// The PCI stack's pod is elsewhere: the demo node is asked about, and its own stack runs.
	elsewhere := buildDoctorReport(doctorInput{nodes: []corev1.Node{*demoNode()}, named: true, stacks: stacks,
		pods: []corev1.Pod{stackPod("web", "demo", "demo"), stackPod("net", "pci", "metal")}})
	if len(elsewhere.Problems) != 0 {
		t.Errorf("doctor demo with the PCI pod on another node: problems %q", elsewhere.Problems)
	}
	// No node named and no node can run the PCI stack: its pods can only stay Pending. A stack
	// the injector refuses is named with the reason and judged nowhere.
	broken := namedStack(t, "vhost-user", "web", "broken")
	broken.Spec.Ports = nil
	all := buildDoctorReport(doctorInput{nodes: []corev1.Node{*demoNode()}, stacks: append(stacks, broken)})
	if len(all.Problems) != 1 || !strings.Contains(all.Problems[0], "StackInstance net/pci can run on no node") {
		t.Errorf("problems %q; want net/pci on no node", all.Problems)
	}
	out.Reset()
	if err := all.writeTable(&out, doctorTable{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "StackInstance web/broken: not judged, the injector refuses it: ") {
		t.Errorf("doctor does not name the refused stack:\n%s", out.String())
	}
}

// The structure -o json prints: each check's neededBy, each stack's requirements and nodes,
// and exit 1 with the reason on stderr.
func TestDoctorJSONStructure(t *testing.T) {
	pci := namedStack(t, "sriov", "net", "pci")
	pci.Spec.Ports[0].Device = fsv1.PortDevice{PCI: &fsv1.PCIDevice{Address: "0000:3b:02.0"}}
	r := buildDoctorReport(doctorInput{nodes: []corev1.Node{*demoNode()},
		stacks: []fsv1.StackInstance{namedStack(t, "vhost-user", "web", "demo"), pci}})
	var out bytes.Buffer
	f := &outputFlags{print: newPrintFlagsFor("json")}
	if err := f.printObject(r, &out); err != nil {
		t.Fatal(err)
	}
	var got DoctorReport
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if got.APIVersion != "cli.kubefstack.io/v1alpha1" || got.Kind != "DoctorReport" {
		t.Errorf("apiVersion %q kind %q", got.APIVersion, got.Kind)
	}
	checks := map[string]DoctorCheck{}
	for _, c := range got.Nodes[0].Checks {
		checks[c.Name] = c
	}
	if c := checks["vfio"]; c.Status != "fail" || !slices.Equal(c.NeededBy, []string{"net/pci"}) || c.Label != fsv1.NodeLabelVFIO {
		t.Errorf("vfio check %+v", c)
	}
	if c := checks["hugepages-1Gi"]; len(c.NeededBy) != 0 {
		t.Errorf("hugepages-1Gi needed by %v", c.NeededBy)
	}
	if c := checks["hugepages-2Mi"]; !slices.Equal(c.NeededBy, []string{"net/pci", "web/demo"}) {
		t.Errorf("hugepages-2Mi needed by %v", c.NeededBy)
	}
	if len(got.Stacks) != 2 || got.Stacks[1].Name != "demo" || !slices.Equal(got.Stacks[1].Nodes, []string{"demo"}) ||
		!slices.Contains(got.Stacks[0].Requires, fsv1.NodeLabelVFIO+"=ready") || len(got.Stacks[0].Nodes) != 0 {
		t.Errorf("stacks %+v", got.Stacks)
	}
	if !slices.Equal(got.Nodes[0].CanRun, []string{"web/demo"}) || len(got.Nodes[0].CannotRun) != 1 {
		t.Errorf("node canRun %v cannotRun %v", got.Nodes[0].CanRun, got.Nodes[0].CannotRun)
	}
}
