package dpdk

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
	"github.com/kube-fstack/kube-fstack/internal/test/syncbuf"
)

// A crashed primary costs seconds, not a BackOff (and, on the way, an app started at ready finds
// the shim's contexts counted). The app container's DPDK secondary (testpmd,
// standing in for Nginx under the shim) keeps a shared lock on the dead primary's
// fbarray_memzone, and a new primary started before the app lets go dies with "EAL: Cannot
// allocate memzone list", as the real F-Stack primary did in the cluster. The pod shares one
// PID namespace (a pause process is its init), so the dataplane's exit does not end the app.
// Real: the supervisor, testpmd as primary and as the app's secondary, the launcher, OVS,
// hugepages, namespaces. Not real: F-Stack and Nginx.
func TestCrashedPrimaryRestartsOnceTheAppLetsGo(t *testing.T) {
	p := newPod(t, "fsdp8", "10.99.7.18", 1)
	p.sharePIDNamespace(t)
	launcher := buildLauncher(t, p)
	d := p.startDataplane(t, "1")
	// The app container starts while the dataplane initialises, as the postStart hook lets it;
	// its launcher holds it until ready.
	app, out := p.startAttachedApp(t, launcher)
	d.waitReady(t)
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), "testpmd>"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the app's secondary did not attach within 60s:\n%s", out.String())
		}
	}

	// Ready included the first reading of the shim's contexts, which the stand-in (like
	// F-Stack's zones) makes available only a while after the primary is up: the launcher,
	// started at ready, checked them.
	if o := logtest.Readable(out.String()); !regexp.MustCompile(`(?m)^shim contexts .*free=\[32/32\]`).MatchString(o) || strings.Contains(o, "cannot count the shim contexts") {
		t.Errorf("the app started at ready did not check the shim contexts:\n%s", o)
	}

	must(t, syscall.Kill(d.pidOf(t, "dpdk-testpmd"), syscall.SIGKILL))
	if code := d.exitCode(t, time.Minute); code == 0 {
		t.Fatal("the supervisor exited 0 after its primary was killed")
	}
	// The kubelet restarts the sidecar at once (its first restart has no back-off).
	d2 := p.startDataplane(t, "1")
	d2.waitReady(t)
	log := d2.readable()
	if !strings.Contains(log, "waiting for the previous generation's DPDK secondaries to exit") || !strings.Contains(log, "fbarray_memzone held by pid") {
		t.Errorf("the new supervisor did not say it waited for the app's secondary, naming it:\n%s", log)
	}
	if strings.Contains(log, "Cannot allocate memzone list") {
		t.Errorf("the new primary met the old secondary's lock:\n%s", log)
	}
	err := app.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 75 {
		t.Errorf("the app's launcher ended with %v, want exit 75 (dataplane restarted):\n%s", err, out.String())
	}
	if g := p.file(podcontract.ReadyFile); g != "2" {
		t.Errorf("ready marker %q, want generation 2", g)
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
