package dpdk

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/syncbuf"
)

// App restarts against a long-lived dataplane, with the stand-in shim's context slots standing
// in for F-Stack's (32 per instance, leaked by every SIGKILLed process, none free means kernel
// sockets): through the launcher, the dataplane restarts before the app would start short; the
// same app started without the launcher ends up on the kernel. Real: the supervisor with
// testpmd behind OVS, the launcher binary, the stand-in library, mount+PID namespaces playing
// the app container (killed as the kubelet kills a container). Not real: F-Stack's zones.
func TestAppRestartsNeverExhaustTheShim(t *testing.T) {
	p := newPod(t, "fsdp6", "10.99.7.16", 1)
	app := newApp(t, p)
	d := p.startDataplane(t, "1", "--shim-contexts=standin", "--contexts-interval=50ms")
	d.waitReady(t)

	// With the coupling: 33 SIGKILLed starts. The first 32 take the generation's 32 slots; the
	// 33rd finds none and gets the dataplane restarted first.
	for i := 1; i <= 33; i++ {
		out := app.startAndKill(t, true)
		if !strings.Contains(out, "holds shim context") {
			t.Fatalf("start %d through the launcher did not get a shim context:\n%s", i, out)
		}
		if i == 32 {
			waitMetrics(t, d, "0 free after 32 SIGKILLed starts (the stand-in leaks on SIGKILL)", `fstack_shim_contexts_free{process="0"} 0`)
		}
	}
	d.waitReady(t)
	if g := p.file(podcontract.GenerationFile); g != "2" {
		t.Fatalf("generation %q after the 33rd start, want 2 (a dataplane restart)", g)
	}
	waitMetrics(t, d, "one restart, and 31 free in the new generation", "fstack_dataplane_restarts_for_contexts_total 1", `fstack_shim_contexts_free{process="0"} 31`)

	// Without the coupling the same restarts end on kernel sockets: the failure it prevents.
	for i := 1; i <= 31; i++ {
		app.startAndKill(t, false)
	}
	if out := app.startAndKill(t, false); !strings.Contains(out, "no free shim context in instance 0") {
		t.Fatalf("the 32nd bare start on generation 2 did not fall back:\n%s", out)
	}
}

// In the pod's one PID namespace (shareProcessNamespace, as injected), a SIGKILLed app's shim
// context comes back within a second, as the image's F-Stack gives it back (patch 0007; the
// stand-in's supervisor plays fstack's loop): 34 bare starts (no launcher, so nothing asks for a
// dataplane restart), each SIGKILLed, all get a context, and the dataplane stays on its first
// generation. On main the 33rd found none and silently fell back to kernel sockets. (In
// TestAppRestartsNeverExhaustTheShim the app has a PID namespace of its own, where a holder's pid
// means nothing to the dataplane: those slots stay held, and the launcher's coupling is what
// saves the app.)
// Real: the supervisor with testpmd behind OVS, the stand-in library, mount and PID namespaces.
// Not real: F-Stack's zones.
func TestSIGKILLedAppsContextsComeBack(t *testing.T) {
	p := newPod(t, "fsdpk", "10.99.7.22", 1)
	p.sharePIDNamespace(t)
	app := newApp(t, p)
	d := p.startDataplane(t, "1", "--shim-contexts=standin", "--contexts-interval=50ms")
	d.waitReady(t)
	for i := 1; i <= 34; i++ {
		if out := app.startAndKill(t, false); !strings.Contains(out, "holds shim context") {
			t.Fatalf("SIGKILLed start %d did not get a shim context:\n%s", i, out)
		}
		waitMetrics(t, d, fmt.Sprintf("all 32 free again after SIGKILLed start %d", i), `fstack_shim_contexts_free{process="0"} 32`)
	}
	if g := p.file(podcontract.GenerationFile); g != "1" {
		t.Fatalf("generation %q after the SIGKILLs, want 1 (no dataplane restart)", g)
	}
}

// The supervisor finds a memzone through a real primary's telemetry and reads it from the
// primary's memory: the path of the F-Stack zone reader, checked on testpmd's mbuf pool (a
// struct rte_mempool starts with its name).
func TestMemzoneReadThroughProcMem(t *testing.T) {
	p := newPod(t, "fsdp7", "10.99.7.17", 1)
	d := p.startDataplane(t, "1")
	d.waitReady(t)
	c, err := telemetry.Dial(telemetry.SocketPath(p.runDir, "rte"), 5*time.Second, telemetry.ProcessOf(d.cmd.Process.Pid))
	must(t, err)
	defer c.Close()
	found, err := c.FindMemzones("MP_mb_pool_0")
	must(t, err)
	mz := found["MP_mb_pool_0"]
	if mz == nil {
		t.Fatal("no memzone MP_mb_pool_0 in the primary's /eal/memzone_list")
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", d.pidOf(t, "dpdk-testpmd")))
	must(t, err)
	defer mem.Close()
	b := make([]byte, 16)
	if _, err := mem.ReadAt(b, int64(mz.Address)); err != nil {
		t.Fatalf("read the memzone at 0x%x: %v", mz.Address, err)
	}
	if !bytes.HasPrefix(b, []byte("mb_pool_0\x00")) {
		t.Fatalf("memzone MP_mb_pool_0 at 0x%x starts with %q, want the mempool's name", mz.Address, b)
	}
}

// waitMetrics waits for /metrics to hold every line in want: the supervisor reads the slots
// every 50 ms, so a reading may lag the last kill by that much.
func waitMetrics(t *testing.T, d *dataplane, what string, want ...string) {
	t.Helper()
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, body = d.get(podcontract.MetricsPath)
		ok := true
		for _, w := range want {
			ok = ok && regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(w)+`$`).MatchString(body)
		}
		if ok {
			return
		}
	}
	t.Fatalf("/metrics never showed %s (%q):\n%s", what, want, body)
}

// testApp is the app container: the launcher (built from this tree) with the environment the
// injection gives the container, or the stand-in library preloaded directly; bash opening an
// AF_INET socket as its first act.
type testApp struct {
	p        *pod
	launcher string
	lib      string
	// env is the app container's environment as the injection writes it.
	env []string
}

// newApp builds the launcher and the stand-in shim, which it puts in the image's shim dir for
// the supervisor to place in the shim volume: call it before the dataplane starts.
func newApp(t *testing.T, p *pod) *testApp {
	t.Helper()
	a := &testApp{p: p, launcher: filepath.Join(p.dir, "fstack-launcher"), lib: filepath.Join(p.dir, "libff_syscall.so"), env: injectedAppEnv(t, p)}
	if out, err := exec.Command("go", "build", "-o", a.launcher, "github.com/kube-fstack/kube-fstack/dataplane-image/cmd/fstack-launcher").CombinedOutput(); err != nil {
		t.Fatalf("build the launcher: %v\n%s", err, out)
	}
	script := filepath.Join(repoRoot(t), "dataplane-image/standin/shim/build.sh")
	if out, err := exec.Command(script, a.lib).CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in shim (gcc): %v\n%s", err, out)
	}
	data, err := os.ReadFile(a.lib)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(p.imgShim, "kernel-event+multi-sc", podcontract.ShimLibrary), data, 0o755))
	return a
}

func repoRoot(t *testing.T) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	must(t, err)
	return strings.TrimSpace(string(out))
}

// startAndKill starts the app, waits until it has opened its socket, and SIGKILLs the
// container's PID 1 (the kernel then kills everything in its PID namespace).
func (a *testApp) startAndKill(t *testing.T, launcher bool) string {
	t.Helper()
	c, out := a.start(t, launcher)
	if kids := descendants(c.Process.Pid); len(kids) > 0 {
		_ = syscall.Kill(kids[0], syscall.SIGKILL)
	}
	_ = c.Wait()
	return out.String()
}

// start runs the app container until the app has opened its socket.
func (a *testApp) start(t *testing.T, launcher bool) (*exec.Cmd, *syncbuf.Buffer) {
	t.Helper()
	cmd := []string{"env"}
	if launcher {
		cmd = append(append(cmd, a.env...), a.launcher, "--")
	} else {
		cmd = append(cmd, podcontract.EnvPreload+"="+a.lib, podcontract.EnvShimInstances+"=1")
	}
	cmd = append(cmd, "bash", "-c", ": 3<>/dev/tcp/127.0.0.1/1 2>/dev/null; echo app-started; exec sleep 1000")
	ns := a.p.namespaces()
	args := append(append(ns[1:], a.p.appArgs("app", "")...), cmd...)
	c := exec.Command(ns[0], args...)
	var out syncbuf.Buffer
	c.Stdout, c.Stderr = &out, &out
	must(t, c.Start())
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "app-started") {
		if time.Now().After(deadline) {
			_ = c.Process.Kill()
			t.Fatalf("the app did not start within 60s:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, &out
}
