package node

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// TCP from a kernel sender on the bridge must reach the pod's vhost-user port with a valid TCP
// checksum. It stands in for real F-Stack, which drops every SYN whose checksum is wrong (the
// kernel leaves it to the device, OVS's vhost-user port negotiates no checksum offload, so nobody
// completes it; measured on F-Stack v1.25): here DPDK testpmd serves the pod's socket as F-Stack
// would and forwards every frame it receives into a pcap file (net_pcap), and the test verifies
// the checksums of the SYNs in it. Two senders connect: one made by hack/lib/kernel-sender.sh
// (through nodetest.AttachPeer, as the local cluster makes the node's), and a control with tx
// checksum offload turned back on, whose SYNs must arrive broken, or this machine does not show
// the fault and the first sender's valid checksums prove nothing.
func TestKernelSenderTCPReachesPodWithValidChecksum(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(1010)
	n.mustAdd(p)
	t.Cleanup(func() { n.mustDel(p); n.assertNothingLeft() })
	info := podDevInfo(t, n, p)
	capture := filepath.Join(env.tmp, fmt.Sprintf("syn-%d.pcap", os.Getpid()))
	stop := startTestpmdCapture(t, filepath.Join(n.socketRoot(), p.uid), info, capture)
	waitConnected(t)
	podIP := strings.Split(info.IPs[0], "/")[0]

	made := attachSender(t, "fsk-tcs-%d", "fskt", "10.99.0.210/24", podIP, info.MAC)
	control := attachSender(t, "fsk-tcc-%d", "fskc", "10.99.0.211/24", podIP, info.MAC)
	if out, err := nodetest.Run("ip", "netns", "exec", control.Netns, "ethtool", "-K", control.Link, "tx", "on"); err != nil {
		t.Fatalf("turn tx checksum offload back on for the control sender: %v %s", err, out)
	}
	for _, s := range []*nodetest.Peer{made, control} {
		connect(s, podIP)
	}
	stop()

	syns, err := nodetest.ReadSYNs(capture)
	if err != nil {
		t.Fatal(err)
	}
	bySender := map[netip.Addr][]nodetest.SYN{}
	for _, s := range syns {
		if s.Dst.String() == podIP && s.DstPort == 80 {
			bySender[s.Src] = append(bySender[s.Src], s)
		}
	}
	good, bad := bySender[netip.MustParseAddr("10.99.0.210")], bySender[netip.MustParseAddr("10.99.0.211")]
	if len(good) == 0 || len(bad) == 0 {
		t.Fatalf("SYNs to %s:80 in the capture: %d from the kernel-sender.sh sender, %d from the control; want both (all SYNs: %+v)", podIP, len(good), len(bad), syns)
	}
	for _, s := range bad {
		if s.ChecksumGood {
			t.Fatalf("the control sender (tx checksum offload on) delivered a SYN with a valid checksum %#04x: this machine does not reproduce the fault, so the test proves nothing", s.Checksum)
		}
	}
	valid := 0
	for _, s := range good {
		if !s.ChecksumGood {
			t.Errorf("SYN from the sender hack/lib/kernel-sender.sh made arrived with a bad TCP checksum %#04x: F-Stack would drop it (tx checksum offload must be off on the sender)", s.Checksum)
			continue
		}
		valid++
	}
	t.Logf("SYNs at the vhost-user port: %d of %d valid from the sender kernel-sender.sh made, %d broken from the control", valid, len(good), len(bad))
}

// attachSender puts a kernel sender on the bridge that knows the pod's MAC without ARP (the
// capturing testpmd answers nothing).
func attachSender(t *testing.T, nsFormat, link, addr, podIP, podMAC string) *nodetest.Peer {
	t.Helper()
	peer, err := nodetest.AttachPeer(env.ovs.Vsctl, env.ovs.Netns, bridge, fmt.Sprintf(nsFormat, os.Getpid()), link, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Close)
	if out, err := nodetest.Run("ip", "-n", peer.Netns, "neigh", "replace", podIP, "lladdr", podMAC, "dev", peer.Link, "nud", "permanent"); err != nil {
		t.Fatalf("static neighbour: %v %s", err, out)
	}
	return peer
}

// connect opens a TCP connection from the sender's kernel stack to ip:80. Nothing answers, so
// it only sends its SYN (and a retransmission) and gives up.
func connect(p *nodetest.Peer, ip string) {
	_, _ = nodetest.Run("ip", "netns", "exec", p.Netns, "timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/"+ip+"/80")
}

// startTestpmdCapture runs testpmd as the pod's vhost-user server (as startTestpmd does) with a
// second port, net_pcap, and io forwarding: every frame the pod receives is written to capture.
// The returned stop ends testpmd cleanly, so the file is complete.
func startTestpmdCapture(t *testing.T, podDir string, info *podcontract.DevInfo, capture string) (stop func()) {
	t.Helper()
	prefix := fmt.Sprintf("fsktc%d", os.Getpid())
	cmd, stdin, logPath := podTestpmd(t, podDir, info, prefix, []string{"--vdev=net_pcap0,tx_pcap=" + capture}, []string{"--forward-mode=io", "--auto-start"})
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		quitTestpmd(cmd, stdin)
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("testpmd output:\n%s", log)
		}
		files, _ := filepath.Glob(filepath.Join(env.huge.Dir, prefix+"*"))
		for _, f := range files {
			_ = os.Remove(f)
		}
	}
	t.Cleanup(stop)
	return stop
}

// quitTestpmd asks testpmd to quit (a line on stdin), so it closes its ports and the pcap file;
// SIGINT only if it has not after a while.
func quitTestpmd(cmd *exec.Cmd, stdin io.WriteCloser) {
	_, _ = stdin.Write([]byte("\n"))
	_ = stdin.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGINT)
		<-done
	}
}
