package dpdk

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
	"github.com/kube-fstack/kube-fstack/internal/test/syncbuf"
)

// A crashed primary costs seconds, not a BackOff, the third time as the first: the supervisor
// starts a new generation in place and the app's launcher starts the app again against it, both
// in their containers (on main the supervisor exited and the launcher exited 75, and the kubelet
// restarted both with its back-off: 16.5 s, then 44.1 s on real F-Stack). On the way, an app
// started at ready finds the shim's contexts counted, and the app container's DPDK secondary
// (testpmd, standing in for Nginx under the shim), which keeps a shared lock on the dead
// primary's fbarray_memzone, is let go before the next primary starts: a primary started
// before that dies with "EAL: Cannot allocate memzone list", as the real F-Stack primary did in
// the cluster. The pod shares one PID namespace (a pause process is its init).
// Real: the supervisor, testpmd as primary and as the app's secondary, the launcher, OVS,
// hugepages, namespaces. Not real: F-Stack and Nginx.
func TestCrashedPrimaryRestartsInPlaceThreeTimes(t *testing.T) {
	p := newPod(t, "fsdp8", "10.99.7.18", 1)
	p.sharePIDNamespace(t)
	launcher := buildLauncher(t, p)
	d := p.startDataplane(t, "1")
	// The app container starts while the dataplane initialises, as the postStart hook lets it;
	// its launcher holds it until ready.
	app, out := p.startAttachedApp(t, launcher)
	d.waitReady(t)
	attached := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); strings.Count(out.String(), "testpmd>") < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the app's secondary did not attach (start %d) within 90s:\n%s", n, out.String())
			}
		}
	}
	attached(1)

	// Ready included the first reading of the shim's contexts, which the stand-in (like
	// F-Stack's zones) makes available only a while after the primary is up: the launcher,
	// started at ready, checked them.
	if o := logtest.Readable(out.String()); !regexp.MustCompile(`(?m)^shim contexts .*free=\[32/32\]`).MatchString(o) || strings.Contains(o, "cannot count the shim contexts") {
		t.Errorf("the app started at ready did not check the shim contexts:\n%s", o)
	}

	supervisor := d.pidOf(t, "fstack-supervis")
	for kill := 1; kill <= 3; kill++ {
		begin := time.Now()
		must(t, syscall.Kill(d.pidOf(t, "dpdk-testpmd"), syscall.SIGKILL))
		gen := strconv.Itoa(kill + 1)
		for deadline := time.Now().Add(2 * time.Minute); p.file(podcontract.ReadyFile) != gen; time.Sleep(50 * time.Millisecond) {
			select {
			case <-d.done:
				t.Fatalf("the supervisor exited after kill %d: %v", kill, d.err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("generation %s not ready within 2 minutes of kill %d", gen, kill)
			}
		}
		d.waitReady(t)
		attached(kill + 1)
		t.Logf("kill %d: generation %s ready and the app attached again after %s", kill, gen, time.Since(begin).Round(time.Millisecond))
		if pid := d.pidOf(t, "fstack-supervis"); pid != supervisor {
			t.Fatalf("kill %d: the supervisor is pid %d, was %d: it restarted instead of starting a generation in place", kill, pid, supervisor)
		}
	}
	log := d.readable()
	if n := strings.Count(log, "restarting the dataplane in place"); n != 3 {
		t.Errorf("%d restarts in place logged, want 3:\n%s", n, log)
	}
	if !strings.Contains(log, "waiting for the previous generation's DPDK secondaries to exit") || !strings.Contains(log, "fbarray_memzone held by pid") {
		t.Errorf("the supervisor did not say it waited for the app's secondary, naming it:\n%s", log)
	}
	if strings.Contains(log, "Cannot allocate memzone list") {
		t.Errorf("a new primary met the old secondary's lock:\n%s", log)
	}
	if app.ProcessState != nil {
		t.Errorf("the app's launcher exited (%v): the kubelet would have restarted the container", app.ProcessState)
	}
	if n := strings.Count(logtest.Readable(out.String()), "restarting the app in place"); n != 3 {
		t.Errorf("the launcher restarted the app %d times in place, want 3:\n%s", n, out.String())
	}
	// Another pod (127.0.0.1 is not the node) without the pod's token is refused.
	if code, body := d.getWith(podcontract.StatusPath, ""); code != http.StatusForbidden || !strings.Contains(body, podcontract.StatusTokenHeader) {
		t.Errorf("/status without the token: %d %s, want 403 naming %s", code, body, podcontract.StatusTokenHeader)
	}
	code, body := d.get(podcontract.StatusPath)
	var st podcontract.Status
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	if st.Generation != 4 || !st.Ready || st.Restarts.Dataplane.ByReason[podcontract.DataplaneRestartProcessExit] != 3 ||
		st.Restarts.Apps["app"].ByReason[podcontract.AppRestartDataplane] != 3 {
		t.Errorf("/status does not count the restarts: %s", body)
	}
	if _, m := d.get(podcontract.MetricsPath); !strings.Contains(m, `fstack_dataplane_restarts_total{reason="process_exit"} 3`) ||
		!strings.Contains(m, `fstack_app_restarts_total{container="app",reason="dataplane"} 3`) {
		t.Errorf("/metrics does not count the restarts:\n%s", m)
	}
}

// appIgnoringTERM is the app: an interactive testpmd secondary, which stays attached until
// stopped, under a shell that ignores SIGTERM, as Nginx attached to a dead primary does (its
// shim calls spin, docs/fstack-rules.md §5): it goes only when its launcher kills the process
// group. An asynchronous command's stdin would be /dev/null, so it gets the app's own via fd 3.
const appIgnoringTERM = `trap '' TERM
exec 3<&0
dpdk-testpmd --lcores=0@0,1@0 --proc-type=secondary --no-pci --log-level=5 -- -i <&3 &
wait`

// startAttachedApp runs the launcher (built from this tree) in an app container of the pod's
// PID namespace with appIgnoringTERM as its app. Its stdin stays open for as long as the test
// runs.
func (p *pod) startAttachedApp(t *testing.T, launcher string) (*exec.Cmd, *syncbuf.Buffer) {
	t.Helper()
	args := append(append(p.namespaces(), p.appArgs("app", "")...),
		"env", podcontract.EnvShimInstances+"=1", podcontract.EnvContainerName+"=app", launcher, "--",
		"sh", "-c", appIgnoringTERM)
	cmd := exec.Command(args[0], args[1:]...)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		for _, pid := range descendants(cmd.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("app output:\n%s", out.String())
		}
	})
	return cmd, out
}

func buildLauncher(t *testing.T, p *pod) string {
	t.Helper()
	launcher := filepath.Join(p.dir, "fstack-launcher")
	if b, err := exec.Command("go", "build", "-o", launcher, "github.com/kube-fstack/kube-fstack/dataplane-image/cmd/fstack-launcher").CombinedOutput(); err != nil {
		t.Fatalf("build the launcher: %v\n%s", err, b)
	}
	return launcher
}
