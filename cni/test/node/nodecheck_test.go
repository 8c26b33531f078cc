package node

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

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
