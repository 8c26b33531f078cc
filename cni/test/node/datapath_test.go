package node

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// testpmdPages is what one small testpmd takes (-m 128, 2 MiB pages), with room to spare.
const testpmdPages = 80

// The data path: DPDK testpmd, in a mount+network namespace of its own that sees only the
// CNI-made directory (at the in-pod path), serves the vhost-user socket with the device info's
// path and MAC; OVS connects to it; a veth peer on the same bridge pings the pod's IPAM address.
func TestDataPathPingThroughVhostUserPort(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(1000)
	n.mustAdd(p)
	t.Cleanup(func() { n.mustDel(p); n.assertNothingLeft() })
	info := podDevInfo(t, n, p)
	startTestpmd(t, filepath.Join(n.socketRoot(), p.uid), info)
	waitConnected(t)
	peer := addVethPeer(t, "10.99.0.200/24")
	podIP := strings.Split(info.IPs[0], "/")[0]
	if _, err := peer.Ping(podIP, 1); err != nil {
		t.Fatalf("ping through the vhost-user port: %v", err)
	}
}

// podDevInfo reads the device info the plugin wrote for p's attachment.
func podDevInfo(t *testing.T, n *netw, p pod) *podcontract.DevInfo {
	t.Helper()
	info, err := podcontract.ReadDevInfo(filepath.Join(n.socketRoot(), p.uid, p.ifname+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitConnected waits until OVS reports the bridge's (only) vhost-user port connected to the
// testpmd serving it.
func waitConnected(t *testing.T) {
	t.Helper()
	port := ports(t)[0]
	if out, err := env.ovs.Vsctl("--timeout=60", "wait-until", "Interface", port, "status:status=connected"); err != nil {
		t.Fatalf("OVS never reported %s connected: %v %s", port, err, out)
	}
}

func startTestpmd(t *testing.T, podDir string, info *podcontract.DevInfo) {
	t.Helper()
	prefix := fmt.Sprintf("fsktp%d", os.Getpid())
	cmd, stdin, logPath := podTestpmd(t, podDir, info, prefix, nil, []string{"--forward-mode=icmpecho", "--auto-start"})
	t.Cleanup(func() { stopTestpmd(t, cmd, stdin, logPath, prefix) })
}

// podTestpmd starts testpmd as the pod's vhost-user server, in a mount and network namespace of
// its own, with eal as more EAL arguments (another port) and app as its own arguments after
// one forwarding core and its mbufs. It runs until its stdin gets a line or closes (or "quit" in
// interactive mode); its output is in the returned log file.
func podTestpmd(t *testing.T, podDir string, info *podcontract.DevInfo, prefix string, eal, app []string) (*exec.Cmd, io.WriteCloser, string) {
	t.Helper()
	script := `mount -t tmpfs tmpfs /run && mkdir -p /run/kube-fstack/vhost && mount --bind "$0" /run/kube-fstack/vhost &&
exec dpdk-testpmd "$@"`
	argv := append([]string{"--no-pci", "--single-file-segments", "-m", "128", "--huge-dir=" + env.huge.Dir, "--file-prefix=" + prefix, "-l", "0,1",
		"--vdev=virtio_user0,path=" + info.VhostUser.Path + ",server=1,queues=1,mac=" + info.MAC}, eal...)
	argv = append(append(argv, "--", "--nb-cores=1", "--total-num-mbufs=16384"), app...)
	cmd := exec.Command("unshare", append([]string{"--mount", "--net", "--propagation", "private", "--", "sh", "-c", script, podDir}, argv...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(env.tmp, prefix+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, logPath
}

func stopTestpmd(t *testing.T, cmd *exec.Cmd, stdin io.WriteCloser, logPath, prefix string) {
	_, _ = stdin.Write([]byte("\n"))
	_ = stdin.Close()
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	if t.Failed() {
		log, _ := os.ReadFile(logPath)
		t.Logf("testpmd output:\n%s", log)
	}
	files, _ := filepath.Glob(filepath.Join(env.huge.Dir, prefix+"*"))
	for _, f := range files {
		_ = os.Remove(f)
	}
}

// addVethPeer puts a host with addr on the bridge, in a namespace of its own.
func addVethPeer(t *testing.T, addr string) *nodetest.Peer {
	t.Helper()
	peer, err := nodetest.AttachPeer(env.ovs.Vsctl, env.ovs.Netns, bridge, fmt.Sprintf("fsk-peer-%d", os.Getpid()), "fskv", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Close)
	return peer
}
