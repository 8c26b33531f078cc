package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// checkDataplaneConfined reads, from the node, how the runtime really runs the dataplane's
// processes (the supervisor and the stand-in's DPDK primary, testpmd): SYS_NICE as the only
// capability (a vhost-user stack needs no other; the seccomp profile grants DPDK's NUMA calls
// only with it), no_new_privs, and a seccomp filter. That the pod reached Ready and answers ping
// under it shows DPDK needs nothing more.
func checkDataplaneConfined(t *testing.T, p *corev1.Pod) {
	t.Helper()
	for _, comm := range []string{"fstack-supervisor", "dpdk-testpmd"} {
		pids := podProcesses(t, p, comm)
		if len(pids) == 0 {
			t.Fatalf("no %s process in pod %s's cgroup", comm, p.UID)
		}
		for _, pid := range pids {
			st := procStatus(t, pid)
			for key, want := range map[string]string{
				"CapEff": sysNiceOnly, "CapPrm": sysNiceOnly, "CapBnd": sysNiceOnly,
				"NoNewPrivs": "1", "Seccomp": "2", "Uid": "0",
			} {
				if got := st[key]; got != want {
					t.Fatalf("%s (pid %d) runs with %s %q, want %q", comm, pid, key, got, want)
				}
			}
		}
		t.Logf("%s %v: only CAP_SYS_NICE, no_new_privs, seccomp filter, uid 0", comm, pids)
	}
}

// sysNiceOnly is a capability mask of /proc/<pid>/status with only CAP_SYS_NICE (bit 23).
const sysNiceOnly = "0000000000800000"

// procStatus reads /proc/<pid>/status; Uid keeps its first (real) value.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && len(f) > 0 {
			out[k] = f[0]
		}
	}
	return out
}
