package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// twoProcs stands in for a two-process F-Stack stack on a vhost-user port with queues=2: a
// DPDK testpmd primary and a secondary in the primary's mount and network namespaces, where
// process k polls only queue k, as F-Stack's process k does. Both only receive (rxonly):
// testpmd's icmpecho would make every process poll every queue, which is not what F-Stack
// does and corrupts a virtio queue that two processes poll.
type twoProcs struct {
	prefix  string
	primary *testpmdProc
}

type testpmdProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   string
}

// startTwoProcs starts the primary as the socket's server (it finishes its start-up only once
// OVS has connected), then the secondary. The secondary's lcore ids differ from the primary's:
// the mbuf pool's per-lcore caches are shared memory, indexed by lcore id.
func startTwoProcs(t *testing.T, podDir string, info *podcontract.DevInfo) *twoProcs {
	t.Helper()
	tp := &twoProcs{prefix: fmt.Sprintf("fsktq%d", os.Getpid())}
	t.Cleanup(tp.cleanHugepages)
	common := "--rxq=2 --txq=2 --num-procs=2 --nb-cores=1 --forward-mode=rxonly --auto-start"
	script := `mount -t tmpfs tmpfs /run && mkdir -p /run/kube-fstack/vhost && mount --bind "$0" /run/kube-fstack/vhost &&
exec stdbuf -oL dpdk-testpmd --no-pci --single-file-segments -m 128 --huge-dir="$1" --file-prefix="$2" --proc-type=primary -l 0,1 \
  --vdev="virtio_user0,path=$3,server=1,queues=2,mac=$4" -- ` + common + ` --proc-id=0 --total-num-mbufs=16384`
	tp.primary = startTestpmdProc(t, "primary", exec.Command("unshare", "--mount", "--net", "--propagation", "private", "--",
		"sh", "-c", script, podDir, env.huge.Dir, tp.prefix, info.VhostUser.Path, info.MAC))
	tp.primary.waitStarted(t)
	pid := fmt.Sprint(tp.primary.cmd.Process.Pid) // the shell exec'd testpmd
	args := append([]string{"--target", pid, "--mount", "--net", "stdbuf", "-oL", "dpdk-testpmd", "--no-pci", "--single-file-segments", "--huge-dir=" + env.huge.Dir,
		"--file-prefix=" + tp.prefix, "--proc-type=secondary", "--lcores=2@1,3@1",
		"--vdev=virtio_user0,path=" + info.VhostUser.Path + ",server=1,queues=2", "--"}, strings.Fields(common)...)
	secondary := startTestpmdProc(t, "secondary", exec.Command("nsenter", append(args, "--proc-id=1")...))
	secondary.waitStarted(t)
	return tp
}

func startTestpmdProc(t *testing.T, name string, cmd *exec.Cmd) *testpmdProc {
	t.Helper()
	p := &testpmdProc{cmd: cmd, log: filepath.Join(env.tmp, fmt.Sprintf("testpmd-%s-%d.log", name, os.Getpid()))}
	stdin, err := cmd.StdinPipe() // testpmd runs until its stdin gets a line or closes
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t, name) }) // cleanups run last-in first-out: the secondary first
	return p
}

// waitStarted waits for testpmd's "Press enter to exit", printed once forwarding has started
// (stdbuf: stdout to a file is otherwise flushed only at exit).
func (p *testpmdProc) waitStarted(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, _ := os.ReadFile(p.log)
		if bytes.Contains(out, []byte("Press enter to exit")) {
			return
		}
		if p.cmd.ProcessState != nil || syscall.Kill(p.cmd.Process.Pid, 0) != nil {
			break
		}
	}
	out, _ := os.ReadFile(p.log)
	t.Fatalf("testpmd never started forwarding:\n%s", out)
}

func (p *testpmdProc) stop(t *testing.T, name string) {
	_, _ = p.stdin.Write([]byte("\n"))
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	if t.Failed() {
		out, _ := os.ReadFile(p.log)
		t.Logf("testpmd %s output:\n%s", name, out)
	}
}

func (tp *twoProcs) cleanHugepages() {
	files, _ := filepath.Glob(filepath.Join(env.huge.Dir, tp.prefix+"*"))
	for _, f := range files {
		_ = os.Remove(f)
	}
}

// rxPerQueue reads the port's per-queue receive counters from the primary's DPDK telemetry
// (/ethdev/xstats): virtio keeps them in the queues' shared memory, so the primary's view
// includes what the secondary received on queue 1.
func (tp *twoProcs) rxPerQueue(t *testing.T) [2]uint64 {
	t.Helper()
	sock := fmt.Sprintf("/proc/%d/root/run/dpdk/%s/dpdk_telemetry.v2", tp.primary.cmd.Process.Pid, tp.prefix)
	xstats, err := telemetry(sock, "/ethdev/xstats,0")
	if err != nil {
		t.Fatal(err)
	}
	var q [2]uint64
	for i := range q {
		v, ok := xstats[fmt.Sprintf("rx_q%d_good_packets", i)]
		if !ok {
			t.Fatalf("no rx_q%d_good_packets in the port's xstats: %v", i, xstats)
		}
		q[i] = v
	}
	return q
}

// telemetry sends one command to a DPDK telemetry v2 socket and returns the reply's values.
func telemetry(sock, command string) (map[string]uint64, error) {
	c, err := net.Dial("unixpacket", sock)
	if err != nil {
		return nil, fmt.Errorf("DPDK telemetry: %w", err)
	}
	defer c.Close()
	buf := make([]byte, 1<<16)
	if _, err := c.Read(buf); err != nil { // the greeting
		return nil, err
	}
	if _, err := c.Write([]byte(command)); err != nil {
		return nil, err
	}
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	var reply map[string]map[string]uint64
	if err := json.Unmarshal(buf[:n], &reply); err != nil {
		return nil, fmt.Errorf("DPDK telemetry %s: %w: %s", command, err, buf[:n])
	}
	key, _, _ := strings.Cut(command, ",")
	return reply[key], nil
}
