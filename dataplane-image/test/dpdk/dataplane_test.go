package dpdk

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// The whole contract on one pod: the supervisor renders config.ini from a spec and a CNI
// device-info file, starts the primary with F-Stack's EAL arguments on the CNI-made vhost-user
// port, reports ready with the shim in place, the port carries pings through OVS, an app-side
// DPDK secondary in another mount+PID namespace reads the port's counters, the supervisor's
// metrics read them from DPDK telemetry, and killing the primary makes the supervisor exit
// non-zero; the next start moves the generation.
func TestSupervisorRunsDPDKPrimaryBehindOVS(t *testing.T) {
	p := newPod(t, "fsdp1", "10.99.7.10", 1)
	d := p.startDataplane(t, "1") // the container's cpuset: process 0 must land on CPU 1
	d.waitReady(t)

	assertShimPlaced(t, p, "1")
	assertRenderedEAL(t, d)
	peer := addVethPeer(t, "10.99.7.200/24")
	pingThrough(t, peer, p.ip)
	assertSecondaryReadsCounters(t, p)
	assertTelemetryAndMetrics(t, p, d)

	// A dead primary strands every secondary: the supervisor withdraws readiness, names the
	// process, and starts a new generation in place (it does not exit).
	must(t, syscall.Kill(d.pidOf(t, "dpdk-testpmd"), syscall.SIGKILL))
	d.waitGeneration(t, p, "2")
	if !strings.Contains(d.readable(), "F-Stack process 0 (primary) exited: killed by signal killed") {
		t.Errorf("the log does not name the process and its status:\n%s", d.log())
	}
	if g := p.file(podcontract.GenerationFile); g != "2" {
		t.Errorf("generation after a restart = %q, want 2", g)
	}
	// A SIGTERM is a clean stop.
	d.stop()
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("SIGTERM: supervisor exit code %d, want 0\n%s", code, d.log())
	}
	if left, _ := filepath.Glob(filepath.Join(env.huge.Dir, "rtemap_*")); len(left) > 0 {
		t.Errorf("hugepage files left after a clean stop: %v", left)
	}
}

func assertShimPlaced(t *testing.T, p *pod, gen string) {
	t.Helper()
	if g := p.file(podcontract.GenerationFile); g != gen {
		t.Errorf("generation = %q, want %s", g, gen)
	}
	if r := p.file(podcontract.ReadyFile); r != gen {
		t.Errorf("ready marker = %q, want %s", r, gen)
	}
	st, err := os.Stat(filepath.Join(p.shimDir, podcontract.Launcher))
	if err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("launcher not placed executable: %v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(p.shimDir, podcontract.ShimLibrary)); err != nil {
		t.Errorf("shim library of the default mode not placed: %v", err)
	}
	if cfg := p.file("config.ini"); !strings.Contains(cfg, "path="+podSocketDir+"/net1.sock,server=1\n") || !strings.Contains(cfg, "addr="+p.ip) {
		t.Errorf("config.ini does not carry the device-info facts:\n%s", cfg)
	}
}

// assertRenderedEAL checks the primary got F-Stack's EAL argv from the renderer.
func assertRenderedEAL(t *testing.T, d *dataplane) {
	t.Helper()
	want := "dpdk-testpmd --lcores=0@1,1@1 -n4 --proc-type=primary --vdev=virtio_user0,path=" + podSocketDir +
		"/net1.sock,server=1,queues=1,mac=02:fe:00:00:07:01 --no-pci --single-file-segments -- "
	if !strings.Contains(d.readable(), want) {
		t.Errorf("the primary's command line is not F-Stack's EAL argv; want it to contain %q\n%s", want, d.log())
	}
}

// pingThrough pings ip from the peer. Busy-polling testpmds, OVS's PMD and the rest of the
// machine share 2 CPUs, so a burst can lose a packet while a forwarding thread is descheduled:
// a few bursts are allowed, one of which must get every reply.
func pingThrough(t *testing.T, peer *nodetest.Peer, ip string) {
	t.Helper()
	if _, err := peer.Ping(ip, 5); err != nil {
		t.Fatalf("ping through the vhost-user port: %v", err)
	}
}

var rxPackets = regexp.MustCompile(`(?m)^\s*RX-packets:\s*(\d+)`)

// shimDeviceArgs are the device options of the shim's EAL argv (render's ShimEAL, from
// dataplane-image/patches/0005-shim-secondary-no-pci.patch): it probes no PCI device.
var shimDeviceArgs = []string{"--no-pci"}

// pciScanLines are what a DPDK secondary logs for each node PCI device its primary does not
// drive (a virtio-net NIC of a VM, for one), the lines --no-pci keeps out of the app's log.
var pciScanLines = regexp.MustCompile(`(?m)is not driven by the primary process|Requested device .* cannot be used`)

// assertSecondaryReadsCounters is the app side: a DPDK secondary that sees only the shared
// volumes attaches with the same --single-file-segments the shim passes and the shim's device
// options, reads the vhost-user port (a vdev, attached through the primary despite --no-pci),
// and logs no scan of the node's PCI bus.
func assertSecondaryReadsCounters(t *testing.T, p *pod) {
	t.Helper()
	args := append(append([]string{"dpdk-proc-info", "--single-file-segments"}, shimDeviceArgs...), "--log-level=5", "--", "--stats")
	out, err := p.appSecondary("1", args...)
	if err != nil {
		t.Fatalf("dpdk-proc-info as an app-side secondary: %v", err)
	}
	if l := pciScanLines.FindString(out); l != "" {
		t.Errorf("the app-side secondary scanned the node's PCI bus (%q):\n%s", l, out)
	}
	m := rxPackets.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no RX-packets in dpdk-proc-info's output:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < 3 {
		t.Errorf("the secondary reads RX-packets %d, want at least the 3 pings:\n%s", n, out)
	}
}

func assertTelemetryAndMetrics(t *testing.T, p *pod, d *dataplane) {
	t.Helper()
	ports, err := telemetry.AllEthdevStats(telemetry.SocketPath(p.runDir, "rte"), 5*time.Second, telemetry.ProcessOf(d.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("telemetry of the real primary: %v", err)
	}
	if len(ports) != 1 || ports[0].Stats["ipackets"] < 3 || ports[0].Stats["opackets"] < 3 {
		t.Errorf("telemetry /ethdev/stats of the real primary = %+v, want >= 3 packets each way", ports)
	}
	code, body := d.get(podcontract.MetricsPath)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, want := range []string{"fstack_processes_up 1", "fstack_nic_telemetry_up 1", "fstack_dataplane_generation 1", `fstack_dataplane_restarts_total{reason="process_exit"} 0`, `fstack_process_starts_total{process="0"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !regexp.MustCompile(`fstack_nic_rx_packets_total\{port="0"\} [1-9]`).MatchString(body) {
		t.Errorf("/metrics has no NIC rx counter from telemetry:\n%s", body)
	}
	if code, _ := d.get(podcontract.HealthzPath); code != http.StatusOK {
		t.Errorf("/healthz = %d while every process runs", code)
	}
}

// addVethPeer puts a host with addr on the bridge, in a namespace of its own.
func addVethPeer(t *testing.T, addr string) *nodetest.Peer {
	t.Helper()
	peer, err := nodetest.AttachPeer(env.ovs.Vsctl, env.ovs.Netns, bridge, fmt.Sprintf("fsk-dpp-%d", os.Getpid()), "fskd", addr)
	must(t, err)
	t.Cleanup(peer.Close)
	return peer
}

// The CPUs come from the container's real cpuset cgroup: one CPU cannot host two processes, and
// the supervisor says so before starting anything.
func TestTooFewCPUsInTheCpuset(t *testing.T) {
	p := newPod(t, "fsdp4", "10.99.7.13", 2)
	d := p.startDataplane(t, "1")
	if code := d.exitCode(t, 30*time.Second); code != 1 {
		t.Fatalf("exit code %d, want 1\n%s", code, d.log())
	}
	want := "the dataplane container has CPUs 1 but the StackInstance asks for 2 processes; kubelet's static CPU manager must give it 2 exclusive CPUs (Guaranteed pod, integer cpu)"
	if !strings.Contains(d.readable(), want) || d.logIndex(t, "starting process") >= 0 {
		t.Errorf("want %q and no process started:\n%s", want, d.log())
	}
}
