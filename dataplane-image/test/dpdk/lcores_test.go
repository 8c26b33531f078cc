package dpdk

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The lab option spec.dpdk.lcoresPerCPU 2: two F-Stack processes in a cpuset of one CPU, as the
// local cluster's node gives one exclusive CPU. The supervisor accepts the one CPU, gives each
// process KUBE_FSTACK_LCORE_CPUS (for F-Stack's Nginx through an env directive, since nginx
// clears its workers' environment), and the stand-ins build the EAL argv the image's patch 0003
// builds from it: both processes on CPU 1. Each launch mode: testpmd as the program, the stand-in
// of a program linked with libfstack (PerProcess), the stand-in of F-Stack's Nginx. Both
// processes come up (readiness waits for the secondary too), pings pass, and a killed secondary
// is restarted in place naming it, as with a CPU each. F-Stack itself cannot run here: the
// stand-ins read the environment as the patch does (internal/test/fstackini, EALWithEnv).
func TestTwoProcessesShareOneCPU(t *testing.T) {
	cases := []struct {
		name, podName, ip, peer string
		mode                    fsv1.ProgramMode
		launch                  func(p *pod) []string
		want                    []string
		killed                  string
	}{
		{"program", "fsdpl", "10.99.7.15", "10.99.7.205/24", "", nil,
			[]string{"dpdk-testpmd --lcores=0@1,1@1 -n4 --proc-type=secondary --vdev=virtio_user0,path=/var/run/kube-fstack/vhost/net1.sock,server=1,queues=2"},
			"F-Stack process 1 (secondary) exited: killed by signal killed"},
		{"PerProcess", "fsdpm", "10.99.7.16", "10.99.7.206/24", fsv1.ProgramPerProcess,
			func(*pod) []string {
				return []string{"--ready-telemetry=/mempool/list~mb_pool_0", "--native=PerProcess", "--", env.standinProgram}
			},
			[]string{"stand-in F-Stack program (not F-Stack): process 1 as /usr/bin/dpdk-testpmd --lcores=0@1,1@1 -n4 --proc-type=secondary"},
			"F-Stack process 1 (secondary) exited: killed by signal killed"},
		{"Nginx", "fsdpo", "10.99.7.17", "10.99.7.207/24", fsv1.ProgramNginx,
			func(p *pod) []string {
				conf := filepath.Join(p.dir, "nginx.conf")
				must(t, os.WriteFile(conf, []byte("events {}\n"), 0o644))
				return []string{"--ready-telemetry=/mempool/list~mb_pool_0", "--native=Nginx", "--", env.standinNginx, "-c", conf}
			},
			[]string{"env " + podcontract.EnvLcoreCPUs + ";", "worker 1: /usr/bin/dpdk-testpmd --lcores=0@1,1@1 -n4 --proc-type=secondary"},
			"F-Stack process 1 (secondary, nginx worker pid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t, tc.podName, tc.ip, 2)
			writeLabSpec(t, p, tc.mode)
			var d *dataplane
			if tc.launch == nil {
				d = p.startDataplane(t, "1", multiProcArgs()...)
			} else {
				d = p.startSupervisor(t, "1", tc.launch(p))
			}
			d.waitReady(t)
			log := d.readable()
			for _, want := range tc.want {
				if !strings.Contains(log, want) {
					t.Errorf("the log lacks %q:\n%s", want, log)
				}
			}
			if tc.mode == fsv1.ProgramNginx {
				// The master forks the workers; the supervisor counts each as it comes up.
				up0 := d.logIndex(t, "process is up (an nginx worker)", logging.KeyProcess, 0)
				up1 := d.logIndex(t, "process is up (an nginx worker)", logging.KeyProcess, 1)
				if up0 < 0 || up1 < up0 {
					t.Errorf("the log lacks worker 0 then worker 1 up:\n%s", log)
				}
			} else if !d.startedBefore(t, "process is up", 0, 1) {
				t.Errorf("the secondary started before the primary was ready:\n%s", log)
			}
			pids := d.pidsOf("dpdk-testpmd")
			if len(pids) != 2 {
				t.Fatalf("want the two F-Stack processes' testpmd, got %v", pids)
			}
			for _, pid := range pids {
				if got := cpusAllowed(t, pid); got != "1" {
					t.Errorf("testpmd pid %d may run on CPUs %q, want only the cpuset's CPU 1", pid, got)
				}
			}
			if code, body := d.get(podcontract.MetricsPath); code != http.StatusOK || !strings.Contains(body, "fstack_processes_up 2") {
				t.Errorf("/metrics: %d, want fstack_processes_up 2:\n%s", code, body)
			}
			pingThrough(t, addVethPeer(t, tc.peer), p.ip)
			killSecondary(t, p, d, tc.killed)
		})
	}
}

// writeLabSpec is writeProgramSpec's stack (or, without a mode, the plain one) with two lcores
// per CPU.
func writeLabSpec(t *testing.T, p *pod, mode fsv1.ProgramMode) {
	t.Helper()
	spec := fsv1.StackInstanceSpec{
		Processes: 2,
		DPDK:      fsv1.DPDKSpec{LcoresPerCPU: 2},
		Ports: []fsv1.PortSpec{{
			Name: "data", Attachment: "net1",
			Device:     fsv1.PortDevice{VhostUser: &fsv1.VhostUserDevice{Queues: 2}},
			Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressAttachment}},
		}},
	}
	if mode != "" {
		spec.Program = &fsv1.ProgramSpec{Mode: mode}
	}
	data, err := json.Marshal(spec)
	must(t, err)
	must(t, os.WriteFile(p.specFile, data, 0o644))
}

// cpusAllowed is the Cpus_allowed_list of a process's main thread.
func cpusAllowed(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no Cpus_allowed_list", pid)
	return ""
}
