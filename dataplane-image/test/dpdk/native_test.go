package dpdk

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A StackInstance's spec.program, mode PerProcess: the supervisor starts the program (the
// stand-in of a program linked with libfstack, which reads config.ini as ff_init does and
// becomes testpmd with F-Stack's EAL argv) once per process with start.sh's arguments, the
// primary first; the port carries pings through OVS, the metrics count both processes, no shim
// is placed, and a dead secondary stops the dataplane naming it.
func TestNativeProgramPerProcess(t *testing.T) {
	p := newPod(t, "fsdpn", "10.99.7.13", 2)
	writeProgramSpec(t, p, fsv1.ProgramPerProcess)
	d := p.startSupervisor(t, "0-1", []string{"--ready-telemetry=/mempool/list~mb_pool_0",
		"--native=PerProcess", "--", env.standinProgram, "--own-argument"})
	d.waitReady(t)

	log := d.readable()
	for k, argv := range []string{
		env.standinProgram + " --own-argument --conf " + podConfig + " --proc-type=primary --proc-id=0",
		env.standinProgram + " --own-argument --conf " + podConfig + " --proc-type=secondary --proc-id=1",
	} {
		if _, l := d.logLine(t, "starting process", logging.KeyProcess, k); !strings.Contains(l["argv"], argv) {
			t.Errorf("the log lacks process %d started as %q:\n%s", k, argv, log)
		}
	}
	for _, want := range []string{
		"stand-in F-Stack program (not F-Stack): process 1 as /usr/bin/dpdk-testpmd --lcores=0@1,1@1 -n4 --proc-type=secondary --vdev=virtio_user0,path=/var/run/kube-fstack/vhost/net1.sock,server=1,queues=2",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if !d.startedBefore(t, "process is up", 0, 1) {
		t.Errorf("the secondary started before the primary was ready:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(p.shimDir, podcontract.Launcher)); err == nil {
		t.Error("a native program's pod has no app container: no launcher may be placed")
	}
	peer := addVethPeer(t, "10.99.7.203/24")
	pingThrough(t, peer, p.ip)
	code, body := d.get(podcontract.MetricsPath)
	if code != http.StatusOK || !strings.Contains(body, "fstack_processes_up 2") || !strings.Contains(body, "fstack_nic_telemetry_up 1") {
		t.Errorf("/metrics: %d, want fstack_processes_up 2 and telemetry up:\n%s", code, body)
	}

	killSecondary(t, p, d, "F-Stack process 1 (secondary) exited: killed by signal killed")
}

// killSecondary kills the second of the two testpmd processes (process 1), expects the
// supervisor to log a death whose message has named and to start generation 2 in place, and
// returns both pids.
func killSecondary(t *testing.T, p *pod, d *dataplane, named string) []int {
	t.Helper()
	pids := d.pidsOf("dpdk-testpmd")
	if len(pids) != 2 {
		t.Fatalf("want the two F-Stack processes' testpmd, got %v", pids)
	}
	must(t, syscall.Kill(pids[1], syscall.SIGKILL))
	d.waitGeneration(t, p, "2")
	if !strings.Contains(d.readable(), named) {
		t.Errorf("the log does not name process 1 (%q):\n%s", named, d.log())
	}
	return pids
}

// writeProgramSpec gives the pod the spec annotation of a two-process stack whose program runs
// in the given mode, its vhost-user port on net1 addressed by the attachment.
func writeProgramSpec(t *testing.T, p *pod, mode fsv1.ProgramMode) {
	t.Helper()
	spec := fsv1.StackInstanceSpec{
		Processes: 2,
		Program:   &fsv1.ProgramSpec{Mode: mode},
		Ports: []fsv1.PortSpec{{
			Name: "data", Attachment: "net1",
			Device:     fsv1.PortDevice{VhostUser: &fsv1.VhostUserDevice{Queues: 2}},
			Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressAttachment}},
		}},
	}
	data, err := json.Marshal(spec)
	must(t, err)
	must(t, os.WriteFile(p.specFile, data, 0o644))
}

// spec.program mode Nginx: the supervisor starts the stand-in of F-Stack's Nginx, which forks
// one testpmd per worker with F-Stack's EAL argv (worker 0 the primary, the others after its
// init); the supervisor counts the workers as the F-Stack processes, the port carries pings,
// and a dead worker stops the dataplane naming it.
func TestNativeNginx(t *testing.T) {
	p := newPod(t, "fsdpx", "10.99.7.14", 2)
	writeProgramSpec(t, p, fsv1.ProgramNginx)
	conf := filepath.Join(p.dir, "nginx.conf")
	must(t, os.WriteFile(conf, []byte("events {}\n"), 0o644))
	d := p.startSupervisor(t, "0-1", []string{"--ready-telemetry=/mempool/list~mb_pool_0",
		"--native=Nginx", "--", env.standinNginx, "-c", conf})
	d.waitReady(t)
	log := d.readable()
	for _, want := range []string{
		"-g worker_processes 2; fstack_conf " + podConfig + "; daemon off;",
		"worker 1: /usr/bin/dpdk-testpmd --lcores=0@1,1@1 -n4 --proc-type=secondary",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if d.logIndex(t, "process is up (an nginx worker)", logging.KeyProcess, 1, logging.KeyPID, "") < 0 {
		t.Errorf("the log lacks worker 1 up with its pid:\n%s", log)
	}
	pingThrough(t, addVethPeer(t, "10.99.7.204/24"), p.ip)
	if code, body := d.get(podcontract.MetricsPath); code != http.StatusOK || !strings.Contains(body, "fstack_processes_up 2") {
		t.Errorf("/metrics: %d, want fstack_processes_up 2:\n%s", code, body)
	}
	pids := killSecondary(t, p, d, "F-Stack process 1 (secondary, nginx worker pid")
	// The primary worker goes with its master (the supervisor kills the master's group). When the
	// master gave up waiting for it first (the stand-in's 3 s, while the primary's stop waits 5 s
	// on the secondary its master forked again), it dies an orphan, and the machine's init, not
	// the supervisor, reaps it: a zombie is gone too.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if gone(pids[0]) {
			break
		}
		if time.Now().After(deadline) {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pids[0]))
			t.Fatalf("worker 0 (pid %d) outlived its generation: %s", pids[0], stat)
		}
	}
}

// gone reports whether pid has exited: no such process, or a zombie waiting for its reaper.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses and may hold blanks.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}
