package envtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli"
)

// `kubectl fstack doctor` with StackInstances in the API server: on a node like the demo's (2Mi
// pages, OVS-DPDK; no 1Gi pages, no vfio) the two failed checks are needed by no stack and the
// exit status is 0; once the node loses what a stack with a pod there needs, it is 1 and the stack
// is named. No kubelet or node agent runs: the test writes the node's report as the agent would.
func TestCLIDoctorNeededBy(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "doctored")
	testenv.CreateIfAbsent(t, k8s, si)
	statusPod(t, "doctored-0", si.Name, "doctor-demo", corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, true, 0)
	report := &nodecheck.Report{
		Checks: []nodecheck.Check{
			{Name: "hugepages-2Mi", Status: nodecheck.Pass, Detail: "1024 total, 900 free", Label: fsv1.NodeLabelHugePages("2Mi")},
			{Name: "hugepages-1Gi", Status: nodecheck.Fail, Detail: "0 total, 0 free", Fix: "reserve 1Gi pages", Label: fsv1.NodeLabelHugePages("1Gi")},
			{Name: "cpu-manager", Status: nodecheck.Pass, Detail: "policy static", Label: fsv1.NodeLabelCPUManager},
			{Name: "seccomp-profile", Status: nodecheck.Pass, Detail: "installed", Label: fsv1.NodeLabelSeccomp},
			{Name: "ovs-bridge", Status: nodecheck.Pass, Detail: "netdev", Label: fsv1.NodeLabelVhostUser},
			{Name: "vfio", Status: nodecheck.Fail, Detail: "no IOMMU groups", Fix: "enable the IOMMU", Label: fsv1.NodeLabelVFIO},
		},
		Labels: map[string]string{fsv1.NodeLabelHugePages("2Mi"): fsv1.NodeReady, fsv1.NodeLabelCPUManager: fsv1.NodeCPUManagerStatic,
			fsv1.NodeLabelSeccomp: fsv1.NodeReady, fsv1.NodeLabelVhostUser: fsv1.NodeReady},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "doctor-demo", Labels: report.Labels,
		Annotations: map[string]string{fsv1.NodeReportAnnotation: report.Marshal()}}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })

	kubeconfig := writeKubeconfig(t)
	out := runCLI(t, "doctor", "--kubeconfig", kubeconfig, "-n", optedInNS, "doctor-demo")
	t.Logf("kubectl fstack doctor:\n%s", out)
	for _, want := range []string{
		`node doctor-demo: 0 of 6 checks need attention \(2 more failed, needed by no StackInstance\)`,
		`\n  STATUS +CHECK +DETAIL +NEEDED-BY\n`,
		`\n  FAIL +vfio +no IOMMU groups +not needed\n`,
		`\n  PASS +ovs-bridge +netdev +needed by web/doctored\n`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("doctor does not match %q", want)
		}
	}
	// --no-headers: the rows alone, as status's.
	if rows := runCLI(t, "doctor", "--kubeconfig", kubeconfig, "-n", optedInNS, "--no-headers", "doctor-demo"); strings.Contains(rows, "STATUS") ||
		!regexp.MustCompile(`\n  FAIL +vfio +no IOMMU groups +not needed\n`).MatchString(rows) {
		t.Errorf("doctor --no-headers:\n%s", rows)
	}
	var r cli.DoctorReport
	if err := json.Unmarshal([]byte(runCLI(t, "doctor", "--kubeconfig", kubeconfig, "-n", optedInNS, "-o", "json", "doctor-demo")), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Nodes) != 1 || len(r.Problems) != 0 || !strings.Contains(strings.Join(r.Nodes[0].CanRun, " "), "web/doctored") {
		t.Errorf("doctor -o json: %+v", r)
	}
	if got := runCLI(t, "__complete", "doctor", "--kubeconfig", kubeconfig, "doctor-"); !strings.Contains(got, "doctor-demo\n") {
		t.Errorf("doctor NODE completes %q", got)
	}
	if got := runCLI(t, "__complete", "status", "--kubeconfig", kubeconfig, "-n", optedInNS, "doc"); !strings.Contains(got, "doctored\n") {
		t.Errorf("status STACK completes %q", got)
	}

	// The node loses OVS-DPDK (the agent drops the label): the stack's pod there cannot run.
	lost := node.DeepCopy()
	delete(lost.Labels, fsv1.NodeLabelVhostUser)
	if err := k8s.Patch(ctx, lost, client.MergeFrom(node)); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := cli.Run([]string{"doctor", "--kubeconfig", kubeconfig, "-n", optedInNS, "doctor-demo"}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "StackInstance web/doctored has a pod on node doctor-demo, which lacks node.kubefstack.io/vhost-user=ready") ||
		!strings.Contains(stdout.String(), "cannot run: web/doctored (lacks node.kubefstack.io/vhost-user=ready)") {
		t.Errorf("doctor after the label went: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}

// doctor's setup checks against a real API server: a namespace with a StackInstance but without
// the opt-in label, and a stack naming a NetworkAttachmentDefinition where no Multus CRD is
// installed (the API server's discovery has no such kind, which the client reports as a kind it
// cannot map): both fail, with exit status 1, and say what to do.
func TestCLIDoctorSetupChecks(t *testing.T) {
	ctx := context.Background()
	const ns = "doctor-setup"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "needs-multus"))
	si.Spec.Ports[0].Network = &fsv1.NetworkRef{Name: "fstack-net"}
	testenv.CreateIfAbsent(t, k8s, si)

	var stdout, stderr strings.Builder
	code := cli.Run([]string{"doctor", "--kubeconfig", writeKubeconfig(t), "-n", ns}, &stdout, &stderr)
	for _, want := range []string{
		"error: namespace doctor-setup has StackInstance needs-multus but not the label kubefstack.io/injection=enabled",
		"kubectl label namespace doctor-setup kubefstack.io/injection=enabled",
		"error: the API server does not serve NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1), which doctor-setup/needs-multus (spec.ports[0].network) name: Multus is not installed",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("doctor -n %s lacks %q", ns, want)
		}
	}
	if code != 1 || t.Failed() {
		t.Errorf("doctor -n %s: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", ns, code, stdout.String(), stderr.String())
	}
}

// `kubectl fstack version` reads the operator's Deployment (by the chart's labels): its image
// and the dataplane image it injects.
func TestCLIVersionReadsOperatorDeployment(t *testing.T) {
	ctx := context.Background()
	labels := map[string]string{"app.kubernetes.io/part-of": "kube-fstack", "app.kubernetes.io/component": "operator", "app.kubernetes.io/version": "0.3.0"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: plainNS, Name: "kube-fstack-operator", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "operator", Image: "example/kube-fstack-operator:v0.3.0", Args: []string{"--dataplane-image=example/dataplane:v0.3.0"}}}}}}}
	if err := k8s.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), dep) })
	var v cli.VersionInfo
	if err := json.Unmarshal([]byte(runCLI(t, "version", "--kubeconfig", writeKubeconfig(t), "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Operators) != 1 || v.Operators[0].Image != "example/kube-fstack-operator:v0.3.0" ||
		v.Operators[0].DataplaneImage != "example/dataplane:v0.3.0" || v.Operators[0].Namespace != plainNS || v.ClusterError != "" {
		t.Errorf("version -o json: %+v", v)
	}
}

// doctor's exit status 2 against a real API server: a user who may not list nodes (RBAC), one
// who may list nodes but not the stacks' pods, and a NODE that does not exist. Each says why on
// stderr and judges nothing; 0 and 1 are TestCLIDoctorNeededBy's.
func TestCLIDoctorCouldNotLookExits2(t *testing.T) {
	ctx := context.Background()
	const user = "doctor-nodes-only"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"kubefstack.io"}, Resources: []string{"stackinstances"}, Verbs: []string{"list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	kubeconfig := writeKubeconfig(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no right at all", []string{"--as", "nobody"}, `error: list nodes: nodes is forbidden: User "nobody" cannot list resource "nodes"`},
		{"nodes but not pods", []string{"--as", user}, `error: list the pods of StackInstances in any namespace: pods is forbidden: User "doctor-nodes-only" cannot list resource "pods"`},
		{"no such node", []string{"no-such-node"}, `error: node no-such-node: nodes "no-such-node" not found`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			testenv.Eventually(t, 20*time.Second, func() error {
				stdout.Reset()
				stderr.Reset()
				code := cli.Run(append([]string{"doctor", "--kubeconfig", kubeconfig}, c.args...), &stdout, &stderr)
				if code != 2 || !strings.Contains(stderr.String(), c.want) { // RBAC caches take a moment
					return fmt.Errorf("exit %d, want 2 and %q\nstdout:\n%s\nstderr:\n%s", code, c.want, stdout.String(), stderr.String())
				}
				return nil
			})
			if stdout.Len() != 0 {
				t.Errorf("doctor judged what it could not read:\n%s", stdout.String())
			}
		})
	}
}

// The switch checks in doctor: a node whose report the node agent's checks made (nodecheck.Run
// over a node laid out in temp dirs; OVS answered by a stand-in, as OVS-DPDK does not run in
// this tier: the node tier runs the same checks against the real one). Its PMD runs on a CPU the
// kubelet may give a pod exclusively and its bridge has no uplink: the PMD failure takes the
// vhost-user label, so the stack with a pod there is a problem (exit 1) and doctor prints both
// checks with their fixes; with the kubelet's reservedSystemCPUs covering the PMD the label
// returns and the exit status is 0, the uplink warning still shown. (TestCLIDoctorNeededBy's
// stack, in the same namespace and API server, asks for the same label when it ran first.)
func TestCLIDoctorSwitchChecks(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "switched")
	testenv.CreateIfAbsent(t, k8s, si)
	statusPod(t, "switched-0", si.Name, "doctor-switch", corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, true, 0)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "doctor-switch"}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	publish := func(reserved string) {
		t.Helper()
		r := switchReport(t, reserved)
		before := node.DeepCopy()
		node.Labels, node.Annotations = r.Labels, map[string]string{fsv1.NodeReportAnnotation: r.Marshal()}
		if err := k8s.Patch(ctx, node, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := writeKubeconfig(t)
	args := []string{"doctor", "--kubeconfig", kubeconfig, "-n", optedInNS, "doctor-switch"}

	publish("")
	var stdout, stderr strings.Builder
	code := cli.Run(args, &stdout, &stderr)
	out := stdout.String()
	t.Logf("kubectl fstack doctor (exit %d):\n%s%s", code, out, stderr.String())
	for _, want := range []string{
		`\n  PASS +ovs-dpdk-init +dpdk_initialized=true \(other_config:dpdk-init=true\) +needed by (web/doctored, )?web/switched\n`,
		`\n  WARN +ovs-uplink +no uplink: only pods on this node can reach the stack \(bridge "br-fstack" has only vhost-user and internal ports\) +needed by (web/doctored, )?web/switched\n`,
		`\n  FAIL +ovs-pmd-cpus +PMD CPUs 1 \(pmd-cpu-mask=0x2\); CPU 1 can be given exclusively to a Guaranteed pod`,
		`fix ovs-pmd-cpus: .*reservedSystemCPUs: "0-1" in the kubelet's configuration`,
		`fix ovs-uplink: no uplink: .*type=dpdk options:dpdk-devargs=<PCI address>`,
		`cannot run: .*web/switched \(lacks node.kubefstack.io/vhost-user=ready\)`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("doctor does not match %q", want)
		}
	}
	if code != 1 || !strings.Contains(stderr.String(), "StackInstance web/switched has a pod on node doctor-switch, which lacks node.kubefstack.io/vhost-user=ready") {
		t.Errorf("doctor with the PMD on an exclusive CPU: exit %d, want 1 naming the stack\n%s", code, stderr.String())
	}

	publish("1")
	out = runCLI(t, args...)
	for _, want := range []string{
		`\n  PASS +ovs-pmd-cpus +PMD CPUs 1 \(pmd-cpu-mask=0x2\), all outside the kubelet's exclusive pool \(reserved CPUs 1: the kubelet's reservedSystemCPUs`,
		`\n  WARN +ovs-uplink +no uplink: only pods on this node can reach the stack`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("doctor after reservedSystemCPUs=1 does not match %q:\n%s", want, out)
		}
	}
}

// switchOVS answers the checks as OVS-DPDK with DPDK up, the PMD on CPU 1 and a bridge of no
// uplink would (a stand-in: see TestCLIDoctorSwitchChecks).
type switchOVS struct{}

func (switchOVS) BridgeDatapath(context.Context, string) (string, bool, error) {
	return "netdev", true, nil
}

func (switchOVS) BridgeFacts(context.Context, string) (*nodecheck.BridgeFacts, error) {
	return &nodecheck.BridgeFacts{DPDKInitialized: true, DPDKInit: "true", PMDCPUMask: "0x2"}, nil
}

// switchReport runs the node agent's checks on a two-CPU node under the static CPU manager with
// 100m reserved, the kubelet's reservedSystemCPUs as given.
func switchReport(t *testing.T, reserved string) *nodecheck.Report {
	t.Helper()
	dir := t.TempDir()
	for path, data := range map[string]string{
		"kubelet/cpu_manager_state": `{"policyName":"static","defaultCpuSet":"0-1","checksum":1}`,
		"run/vhost/.keep":           "",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":   "512\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages": "512\n",
		"seccomp/" + podcontract.SeccompProfileFile:               "{}",
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return nodecheck.Run(context.Background(), &nodecheck.Config{
		Root: dir, KubeletDir: filepath.Join(dir, "kubelet"), SocketRootParent: filepath.Join(dir, "run"), SocketRootName: "vhost",
		Bridge: "br-fstack", OVS: switchOVS{}, KubeletReservedCPUs: reserved,
		SeccompDir: filepath.Join(dir, "seccomp"), SeccompProfile: []byte("{}"),
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m"), "hugepages-2Mi": resource.MustParse("1Gi")},
	})
}
