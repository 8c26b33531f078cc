package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// checkDataplaneConfined reads, from the node, how the runtime really runs the dataplane's
// processes (the supervisor and the stand-in's DPDK primary, testpmd): no capability at all (a
// vhost-user stack needs none: the node agent's Localhost seccomp profile allows DPDK's NUMA
// calls without SYS_NICE), no_new_privs, and a seccomp filter, the pod naming that profile. That
// the pod reached Ready and answers ping under it shows DPDK needs nothing more.
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
				"CapEff": noCapability, "CapPrm": noCapability, "CapBnd": noCapability,
				"NoNewPrivs": "1", "Seccomp": "2", "Uid": "0",
			} {
				if got := st[key]; got != want {
					t.Fatalf("%s (pid %d) runs with %s %q, want %q", comm, pid, key, got, want)
				}
			}
		}
		t.Logf("%s %v: no capability, no_new_privs, seccomp filter, uid 0", comm, pids)
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name != podcontract.DataplaneContainer {
			continue
		}
		sc := c.SecurityContext
		if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost ||
			sc.SeccompProfile.LocalhostProfile == nil || *sc.SeccompProfile.LocalhostProfile != podcontract.SeccompLocalhostProfile {
			t.Fatalf("the dataplane's seccomp profile is %+v, want Localhost %s", sc, podcontract.SeccompLocalhostProfile)
		}
		checkDataplaneRootReadOnly(t, p)
		return
	}
	t.Fatalf("pod %s has no %s container", p.Name, podcontract.DataplaneContainer)
}

// noCapability is the capability mask of /proc/<pid>/status with none.
const noCapability = "0000000000000000"

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

// checkDataplaneRootReadOnly tries what shareProcessNamespace offers a root app container:
// writing the dataplane's root filesystem through /proc/<supervisor pid>/root. The root is
// read-only; the scratch volume's config directory, where config.ini is, stays writable.
func checkDataplaneRootReadOnly(t *testing.T, p *corev1.Pod) {
	t.Helper()
	through := func(path string) string {
		return `for d in /proc/[0-9]*; do
  if [ "$(cat "$d/comm" 2>/dev/null)" = fstack-supervis ]; then
    touch "$d/root` + path + `" && rm -f "$d/root` + path + `"; exit $?
  fi
done
echo "no fstack-supervisor in the pod's process namespace" >&2; exit 2`
	}
	out, err := env.Kubectl("exec", "-n", p.Namespace, p.Name, "-c", appCont, "--", "sh", "-c", through("/usr/local/bin/kfs-rw-probe"))
	if err == nil || !strings.Contains(err.Error(), "Read-only file system") {
		t.Fatalf("an app container wrote the dataplane's root through /proc/<pid>/root (err %v):\n%s", err, out)
	}
	if out, err := env.Kubectl("exec", "-n", p.Namespace, p.Name, "-c", appCont, "--", "sh", "-c", through(podcontract.DataplaneConfigDir+"/kfs-rw-probe")); err != nil {
		t.Fatalf("the dataplane's %s (scratch volume) is not writable: %v\n%s", podcontract.DataplaneConfigDir, err, out)
	}
	t.Logf("the dataplane's root filesystem is read-only through /proc/<pid>/root; %s is writable", podcontract.DataplaneConfigDir)
}
