package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

const (
	flowsPerRun = 2000 // UDP flows (distinct source ports) per measurement, as in docs/fstack-rules.md §7
	flowBatch   = 100  // sent before waiting for the queues to count them: fits a 256-slot vring
)

// A two-process stack behind a CNI-made port receives on both queues: fstack-cni asked OVS for
// hash tx steering, which spreads flows over the queues the pod's DPDK enabled. With OVS's
// default (thread) steering every packet the same OVS thread forwards lands on one queue, so the
// second process gets nothing: the subtest forces that and shows the assertion fails then, and
// that CHECK reports the port. The network config names no queue count: the two queues are the
// ones the pod's DPDK opens (queues=2 in its vdev, from the StackInstance) and OVS's
// dpdkvhostuserclient port takes what the guest negotiates.
func TestTxSteeringSpreadsFlowsOverBothQueues(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(1100)
	n.mustAdd(p)
	t.Cleanup(func() { n.mustDel(p); n.assertNothingLeft() })
	podDir := filepath.Join(n.socketRoot(), p.uid)
	info, err := podcontract.ReadDevInfo(filepath.Join(podDir, p.ifname+".json"))
	if err != nil {
		t.Fatal(err)
	}
	port := ports(t)[0]
	if got := txSteeringOf(t, port); got != "hash" {
		t.Fatalf("ADD made %s with other_config:tx-steering %q, want hash", port, got)
	}
	procs := startTwoProcs(t, podDir, info)
	waitQueuesEnabled(t, port, 2)
	podIP := strings.Split(info.IPs[0], "/")[0]
	peer := addVethPeer(t, "10.99.0.201/24")
	// rxonly answers no ARP: the peer knows the pod's MAC, and OVS floods to the unlearnt MAC.
	if _, err := nodetest.Run("ip", "-n", peer.Netns, "neigh", "replace", podIP, "lladdr", info.MAC, "dev", "fskvp", "nud", "permanent"); err != nil {
		t.Fatal(err)
	}

	hash := sendFlows(t, procs, peer.Netns, podIP, 20000)
	t.Logf("tx-steering=hash: %d flows, queue 0 received %d, queue 1 received %d", flowsPerRun, hash[0], hash[1])
	if err := bothQueuesReceive(hash); err != nil {
		t.Error(err)
	}
	if err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt()); err != nil {
		t.Errorf("CHECK of a port with hash steering: %v", err)
	}

	t.Run("thread steering leaves one queue idle and fails CHECK", func(t *testing.T) {
		setTxSteering(t, port, "thread")
		sendFlows(t, procs, peer.Netns, podIP, 30000) // settles the change: not measured
		thread := sendFlows(t, procs, peer.Netns, podIP, 40000)
		t.Logf("tx-steering=thread: %d flows, queue 0 received %d, queue 1 received %d", flowsPerRun, thread[0], thread[1])
		if bothQueuesReceive(thread) == nil {
			t.Errorf("with thread steering both queues received (%v): the test does not tell the settings apart", thread)
		}
		err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt())
		if err == nil || !strings.Contains(err.Error(), port) || !strings.Contains(err.Error(), "other_config:tx-steering=hash") {
			t.Errorf("CHECK with thread steering: %v, want an error naming %s and the fix", err, port)
		}
		setTxSteering(t, port, "hash")
	})
}

// On an OVS older than 3.1 (its ovs_version as ovs-ctl records it) the port is made all the same,
// hash included, and the log warns that only queue 0 will receive.
func TestAddWarnsWhenOVSIgnoresTxSteering(t *testing.T) {
	for version, warns := range map[string]bool{"3.0.3": true, "3.1.0": false} {
		if _, err := env.ovs.Vsctl("--no-wait", "set", "Open_vSwitch", ".", "ovs_version="+version); err != nil {
			t.Fatal(err)
		}
		n, p := newNet(t, "1.1.0"), newPod(1200)
		n.plan = localNetwork() // else ADD warns that the node enforces no network plan
		n.mustAdd(p)
		port := ports(t)[0]
		steering := txSteeringOf(t, port)
		n.mustDel(p)
		log, err := os.ReadFile(filepath.Join(n.dir, "fstack-cni.log"))
		if err != nil {
			t.Fatal(err)
		}
		lines, err := logtest.Parse(string(log), logging.FormatText, logging.ComponentCNI)
		if err != nil {
			t.Fatal(err)
		}
		_, warned := logtest.Find(lines, "OVS "+version+" ignores other_config:tx-steering=hash", map[string]string{"level": "WARN"})
		if warned != warns || !warns && strings.Contains(string(log), "WARN") || steering != "hash" {
			t.Errorf("OVS %s: warned %v, want %v; steering %q:\n%s", version, warned, warns, steering, log)
		}
	}
	if _, err := env.ovs.Vsctl("--no-wait", "clear", "Open_vSwitch", ".", "ovs_version"); err != nil {
		t.Fatal(err)
	}
}

// txSteeringOf reads the port's other_config:tx-steering, "" when it is not set.
func txSteeringOf(t *testing.T, port string) string {
	t.Helper()
	out, err := env.ovs.Vsctl("--if-exists", "get", "Interface", port, "other_config:tx-steering")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(strings.TrimSpace(out), `"`)
}

// bothQueuesReceive is the test's claim: each process got a share of the flows (at least a
// tenth; hashing 2000 flows onto 2 queues gives far more unless it does not spread at all).
func bothQueuesReceive(q [2]uint64) error {
	total := q[0] + q[1]
	for i, v := range q {
		if v*10 < total {
			return fmt.Errorf("queue %d received %d of %d packets: its process serves nothing (per queue %v)", i, v, total, q)
		}
	}
	return nil
}

// setTxSteering changes the port's steering as an operator would and waits until ovs-vswitchd
// has applied it (it logs each change).
func setTxSteering(t *testing.T, port, mode string) {
	t.Helper()
	logPath := filepath.Join(env.ovs.Dir, "ovs-vswitchd.log")
	before, _ := os.ReadFile(logPath)
	if _, err := env.ovs.Vsctl("--timeout=30", "set", "Interface", port, "other_config:tx-steering="+mode); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s: Tx packet steering mode has been set to '%s'.", port, mode)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out, _ := os.ReadFile(logPath); len(out) > len(before) && strings.Contains(string(out[len(before):]), want) {
			return
		}
	}
	t.Fatalf("ovs-vswitchd never logged %q", want)
}

// waitQueuesEnabled waits until ovs-vswitchd polls n enabled queues of the port, that is until
// the pod's DPDK has enabled them all.
func waitQueuesEnabled(t *testing.T, port string, n int) {
	t.Helper()
	var out string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out = appctl(t, "dpif-netdev/pmd-rxq-show")
		enabled := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "port: "+port) && strings.Contains(line, "(enabled)") {
				enabled++
			}
		}
		if enabled == n {
			return
		}
	}
	t.Fatalf("ovs-vswitchd never polled %d enabled queues of %s:\n%s", n, port, out)
}

// appctl runs ovs-appctl against the instance's ovs-vswitchd. Its control socket is named after
// the program (ovs-vswitchd-dpdk.<pid>.ctl), not after the pidfile ovs-appctl would go by.
func appctl(t *testing.T, args ...string) string {
	t.Helper()
	ctl, _ := filepath.Glob(filepath.Join(env.ovs.Dir, "ovs-vswitchd*.ctl"))
	if len(ctl) != 1 {
		t.Fatalf("want one ovs-vswitchd control socket in %s, found %v", env.ovs.Dir, ctl)
	}
	out, err := nodetest.Run("ovs-appctl", append([]string{"-t", ctl[0]}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sendFlows sends flowsPerRun UDP packets to the pod from the peer's namespace, each from its
// own source port starting at firstPort, and returns how many packets each queue received
// meanwhile. It sends in batches and waits for each batch to be counted, so nothing overflows
// a ring on the way; a packet lost on the way fails the test.
func sendFlows(t *testing.T, procs *twoProcs, netns, podIP string, firstPort int) [2]uint64 {
	t.Helper()
	start := procs.rxPerQueue(t)
	var now [2]uint64
	for sent := 0; sent < flowsPerRun; sent += flowBatch {
		if err := sendUDPFrom(netns, podIP, firstPort+sent, flowBatch); err != nil {
			t.Fatal(err)
		}
		want := uint64(sent + flowBatch)
		deadline := time.Now().Add(30 * time.Second)
		for now = procs.rxPerQueue(t); now[0]+now[1]-start[0]-start[1] < want; now = procs.rxPerQueue(t) {
			if time.Now().After(deadline) {
				t.Fatalf("the queues counted %d packets of %d sent (per queue %v -> %v)", now[0]+now[1]-start[0]-start[1], want, start, now)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return [2]uint64{now[0] - start[0], now[1] - start[1]}
}

// sendUDPFrom sends one datagram from each of count source ports in the named namespace. The
// sockets are made on a thread moved into it; a socket stays in the namespace it was made in.
func sendUDPFrom(netns, dst string, firstPort, count int) error {
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer self.Close()
	target, err := os.Open(nodetest.NetnsPath(netns))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter %s: %w", netns, err)
	}
	defer func() {
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // else the thread ends with the goroutine
		}
	}()
	to := &net.UDPAddr{IP: net.ParseIP(dst), Port: 9}
	for port := firstPort; port < firstPort+count; port++ {
		c, err := net.DialUDP("udp4", &net.UDPAddr{Port: port}, to)
		if err != nil {
			return err
		}
		_, err = c.Write([]byte("kube-fstack tx steering"))
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
