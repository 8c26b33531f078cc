package node

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// The node agent's kernel-TCP check against the real OVSDB and the real kernel: a sender made
// by hack/lib/kernel-sender.sh with both veth ends in ovs-vswitchd's namespace (where the agent
// runs when OVS runs on the host: the check runs there too) passes; with the sender's offload
// turned back on, the check warns and names it. The bridge's own internal port is judged too.
func TestNodeCheckKernelTCPChecksum(t *testing.T) {
	ns, port, sender := env.ovs.Netns, "fskncko", "fsknckp"
	del := func() {
		_, _ = env.ovs.Vsctl("--timeout=30", "--if-exists", "del-port", bridge, port)
		_, _ = nodetest.Run("ip", "-n", ns, "link", "del", sender)
	}
	del()
	t.Cleanup(del)
	if out, err := nodetest.Run(nodetest.KernelSenderScript(), port, ns, sender, ns, "10.99.0.212/24"); err != nil {
		t.Fatalf("kernel-sender.sh: %v %s", err, out)
	}
	if out, err := env.ovs.Vsctl("--timeout=30", "add-port", bridge, port); err != nil {
		t.Fatalf("add-port: %v %s", err, out)
	}
	facts, err := (&nodecheck.OVSDB{Socket: env.ovs.DBSock()}).BridgeFacts(context.Background(), bridge)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(facts.KernelPorts, port) || !slices.Contains(facts.KernelPorts, bridge) || facts.UserspaceTSO != "" {
		t.Fatalf("facts %+v: want the kernel ports %s and %s (the internal one), userspace TSO unset", facts, port, bridge)
	}

	c := inNetns(t, ns, func() nodecheck.Check { return nodecheck.KernelTCP(facts, nodecheck.KernelLinks{}) })
	if c.Status != nodecheck.Pass || !strings.Contains(c.Detail, sender+" (peer of port "+port+")") || !strings.Contains(c.Detail, bridge) {
		t.Errorf("with kernel-sender.sh's sender: %+v; want pass naming %s and %s", c, sender, bridge)
	}
	if out, err := nodetest.Run("ip", "netns", "exec", ns, "ethtool", "-K", sender, "tx", "on"); err != nil {
		t.Fatalf("ethtool: %v %s", err, out)
	}
	c = inNetns(t, ns, func() nodecheck.Check { return nodecheck.KernelTCP(facts, nodecheck.KernelLinks{}) })
	if c.Status != nodecheck.Warn || !strings.Contains(c.Detail, "tx checksum offload on: "+sender) || !strings.Contains(c.Fix, "for "+sender) {
		t.Errorf("with the sender's offload on: %+v; want a warning and a fix naming %s", c, sender)
	}
	t.Logf("check: %s: %s", c.Status, c.Detail)
}

// inNetns runs f on a thread switched into the named network namespace.
func inNetns[T any](t *testing.T, name string, f func() T) T {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	target, err := os.Open(nodetest.NetnsPath(name))
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			panic("cannot return to the test's network namespace: " + err.Error())
		}
	}()
	return f()
}

// The switch checks against the real OVS-DPDK of the tier, through the installer's path (OVSDB
// asked, the answers file written, read back by the agent's checks):
//   - ovs-dpdk-init passes on it, and fails on an OVSDB whose ovs-vswitchd never brought DPDK up;
//   - ovs-uplink on a bridge of its own: only the internal port warns "no uplink" and keeps the
//     node ready; a veth port whose link is up passes; the same port set down fails with a fix;
//   - ovs-pmd-cpus: the instance's PMD runs on CPU 1 (pmd-cpu-mask=0x2), and a kubelet
//     checkpoint (written by the test) of a static policy over CPUs 0-1 with 100m reserved (the
//     kubelet reserves CPU 0) fails; with the kubelet's reservedSystemCPUs 1, or policy none, it
//     passes.
func TestNodeCheckSwitch(t *testing.T) {
	const br, link = "fskncbr", "fskncu"
	ovs := env.ovs
	delBr := func() { _, _ = ovs.Vsctl("--timeout=30", "--if-exists", "del-br", br) }
	delBr()
	t.Cleanup(delBr)
	if out, err := ovs.Vsctl("--timeout=30", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev"); err != nil {
		t.Fatalf("add-br: %v %s", err, out)
	}
	n := newCheckNode(t, br, &nodecheck.OVSDB{Socket: ovs.DBSock()})
	n.checkpoint(t, `{"policyName":"static","defaultCpuSet":"0-1","checksum":1}`)

	r := n.run(t)
	wantCheck(t, r, "ovs-dpdk-init", nodecheck.Pass, "dpdk_initialized=true (other_config:dpdk-init=true)")
	wantCheck(t, r, "ovs-uplink", nodecheck.Warn, "no uplink: only pods on this node can reach the stack")
	wantCheck(t, r, "ovs-pmd-cpus", nodecheck.Fail, "PMD CPUs 1 (pmd-cpu-mask=0x2); CPU 1 can be given exclusively to a Guaranteed pod (reserved CPUs 0:")
	if c := find(t, r, "ovs-pmd-cpus"); !strings.Contains(c.Fix, `reservedSystemCPUs: "0-1"`) || !strings.Contains(c.Fix, "pmd-cpu-mask=0x1") {
		t.Errorf("ovs-pmd-cpus fix %q: want reservedSystemCPUs 0-1 or pmd-cpu-mask=0x1", c.Fix)
	}
	n.cfg.KubeletReservedCPUs = "1"
	wantCheck(t, n.run(t), "ovs-pmd-cpus", nodecheck.Pass, "PMD CPUs 1 (pmd-cpu-mask=0x2), all outside the kubelet's exclusive pool (reserved CPUs 1: the kubelet's reservedSystemCPUs")
	n.cfg.KubeletReservedCPUs = ""
	n.checkpoint(t, `{"policyName":"none","defaultCpuSet":"","checksum":1}`)
	wantCheck(t, n.run(t), "ovs-pmd-cpus", nodecheck.Pass, "CPU manager policy none")
	if r.Labels[fsv1.NodeLabelVhostUser] != "" {
		t.Errorf("ready with the PMD on an exclusive CPU: %v", r.Labels)
	}

	peer, err := nodetest.AttachPeer(ovs.Vsctl, ovs.Netns, br, "fskncns", link, "10.99.0.213/24")
	if err != nil {
		t.Fatalf("uplink: %v", err)
	}
	t.Cleanup(peer.Close)
	r = n.waitFor(t, "ovs-uplink", nodecheck.Pass)
	wantCheck(t, r, "ovs-uplink", nodecheck.Pass, "up: "+link+"o (system)")
	if r.Labels[fsv1.NodeLabelVhostUser] != fsv1.NodeReady {
		t.Errorf("not ready with DPDK up, an uplink up and the PMD outside the exclusive pool: %v %+v", r.Labels, r.Failed())
	}
	if out, err := nodetest.Run("ip", "-n", ovs.Netns, "link", "set", link+"o", "down"); err != nil {
		t.Fatalf("link down: %v %s", err, out)
	}
	r = n.waitFor(t, "ovs-uplink", nodecheck.Fail)
	wantCheck(t, r, "ovs-uplink", nodecheck.Fail, "no uplink is up, down: "+link+"o (system, link down, admin down)")
	if c := find(t, r, "ovs-uplink"); !strings.Contains(c.Fix, "ip link set <name> up") {
		t.Errorf("ovs-uplink fix %q", c.Fix)
	}
	if _, ready := r.Labels[fsv1.NodeLabelVhostUser]; ready {
		t.Errorf("ready with its only uplink down: %v", r.Labels)
	}

	db, err := nodetest.StartDBOnly(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.StopDB)
	if out, err := db.Vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:dpdk-init=true", "--", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	n.ovsdb = &nodecheck.OVSDB{Socket: db.DBSock()}
	r = n.run(t)
	wantCheck(t, r, "ovs-dpdk-init", nodecheck.Fail, "dpdk_initialized=false (other_config:dpdk-init=true): ovs-vswitchd has no DPDK")
	if _, ready := r.Labels[fsv1.NodeLabelVhostUser]; ready {
		t.Errorf("ready without DPDK in OVS: %v", r.Labels)
	}
}

// checkNode is a node for nodecheck.Run: the real /sys and /proc, a kubelet dir of the test's,
// OVS asked as the installer container asks it and read back from its answers file.
type checkNode struct {
	cfg     nodecheck.Config
	ovsdb   *nodecheck.OVSDB
	answers string
	kubelet string
}

func newCheckNode(t *testing.T, br string, db *nodecheck.OVSDB) *checkNode {
	t.Helper()
	dir := t.TempDir()
	n := &checkNode{ovsdb: db, answers: filepath.Join(dir, "ovs.json"), kubelet: filepath.Join(dir, "kubelet")}
	for _, d := range []string{n.kubelet, filepath.Join(dir, "run", "vhost")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.cfg = nodecheck.Config{Root: "/", KubeletDir: n.kubelet, Bridge: br,
		SocketRootParent: filepath.Join(dir, "run"), SocketRootName: "vhost",
		OVS:         &nodecheck.OVSFile{Path: n.answers, MaxAge: time.Minute},
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")}}
	return n
}

func (n *checkNode) checkpoint(t *testing.T, state string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(n.kubelet, "cpu_manager_state"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run asks OVS, writes the answers as the installer does, and runs the checks on them.
func (n *checkNode) run(t *testing.T) *nodecheck.Report {
	t.Helper()
	a := nodecheck.AskOVS(context.Background(), n.ovsdb, n.cfg.Bridge, time.Now())
	if err := nodecheck.WriteOVSAnswers(n.answers, a); err != nil {
		t.Fatal(err)
	}
	return nodecheck.Run(context.Background(), &n.cfg)
}

// waitFor runs the checks until name has status: OVS updates link_state when the kernel reports
// the carrier change (a bound on setup, not a timed assertion).
func (n *checkNode) waitFor(t *testing.T, name string, status nodecheck.Status) *nodecheck.Report {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := n.run(t)
		if c := find(t, r, name); c.Status == status || time.Now().After(deadline) {
			return r
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func find(t *testing.T, r *nodecheck.Report, name string) nodecheck.Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s in %+v", name, r.Checks)
	return nodecheck.Check{}
}

func wantCheck(t *testing.T, r *nodecheck.Report, name string, status nodecheck.Status, detail string) {
	t.Helper()
	c := find(t, r, name)
	if c.Status != status || !strings.Contains(c.Detail, detail) {
		t.Errorf("%s = %s %q\nwant %s with %q", name, c.Status, c.Detail, status, detail)
	}
	t.Logf("%s: %s: %s", name, c.Status, c.Detail)
}
