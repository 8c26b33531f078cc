package dpdk

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// injectedAppEnv is the app container's environment as the injection writes it for the pod's
// spec (the values it sets; none comes from the downward API), as NAME=VALUE entries.
func injectedAppEnv(t *testing.T, p *pod) []string {
	t.Helper()
	raw, err := os.ReadFile(p.specFile)
	must(t, err)
	si := fixtures.StackInstance("s", fixtures.InNamespace("web", "s"))
	must(t, json.Unmarshal(raw, &si.Spec))
	pod := fixtures.Pod("app", fixtures.WithNamespace("web"), fixtures.WithStackLabel("s"), fixtures.WithContainer(corev1.Container{
		Name: "app", Image: "app", Command: []string{"bash"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
	}))
	out, d, err := inject.Inject(pod, si, inject.DefaultConfig())
	if err != nil || d != inject.Injected {
		t.Fatalf("inject: %s, %v", d, err)
	}
	var env []string
	for _, e := range out.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env
}

// What kubectl exec does in an injected app container (a shell, an exec probe, a hook): a
// process in the container's namespaces with the container's environment. With the stand-in
// shim's context slots standing in for F-Stack's, a process that loads the shim and opens an
// inet socket holds one, and SIGKILL (the kubelet's, at an exec probe's timeout) leaks it. The
// exec'd process must load nothing: the count stays as the app left it. Real: the injector's
// environment, the launcher binary, the supervisor counting the slots, namespaces as a pod's.
func TestExecInTheAppContainerTakesNoShimContext(t *testing.T) {
	p := newPod(t, "fsdp8", "10.99.7.18", 1)
	app := newApp(t, p)
	d := p.startDataplane(t, "1", "--shim-contexts=standin", "--contexts-interval=50ms")
	d.waitReady(t)
	c, out := app.start(t, true)
	defer func() {
		// The container's PID 1 takes its namespace's processes with it, and with them the
		// output pipe that Wait waits for.
		if kids := descendants(c.Process.Pid); len(kids) > 0 {
			_ = syscall.Kill(kids[0], syscall.SIGKILL)
		}
		_ = c.Wait()
	}()
	if !strings.Contains(out.String(), "holds shim context") {
		t.Fatalf("the app did not take a shim context through the launcher:\n%s", out.String())
	}
	before := freshFree(t, p, shimctx.Now())
	if before != 31 {
		t.Fatalf("%d free with the app running, want 31", before)
	}
	kids := descendants(c.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("the app container has no process")
	}
	// The container's environment (and PATH, which kubectl exec gets from the image) only.
	args := append([]string{"-t", strconv.Itoa(kids[0]), "--mount", "--pid", "--", "env", "-i", "PATH=" + os.Getenv("PATH")}, app.env...)
	args = append(args, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/1; kill -9 $$")
	execOut, err := exec.Command("nsenter", args...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the exec'd shell was not SIGKILLed (%v):\n%s", err, execOut)
	}
	if after := freshFree(t, p, shimctx.Now()); after != before {
		t.Fatalf("%d free after a SIGKILLed kubectl exec shell opened an inet socket, %d before: it loaded the shim (container env %q):\n%s",
			after, before, app.env, execOut)
	}
	t.Logf("%d free before and after; container env %q; the exec'd shell said: %s", before, app.env, strings.TrimSpace(string(execOut)))
}

// freshFree is instance 0's free slots in the supervisor's first reading that began after since.
func freshFree(t *testing.T, p *pod, since int64) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err := shimctx.ReadState(p.shimDir)
		if err == nil && st.ReadAt > since && len(st.Instances) > 0 {
			return st.Instances[0].Free
		}
	}
	t.Fatalf("no reading of the shim contexts after %d in %s", since, p.shimDir)
	return 0
}

// An app image that lacks a library the shim needs is refused before the app starts, naming
// it; with the library in the shim volume's lib/ (where the dataplane image puts the shim's own
// libraries), the same image starts. The shim here is a library built by this test that needs
// another (as libff_syscall.so needs libnuma and libatomic) through its run path $ORIGIN/lib.
// Real: the supervisor placing the shim, the launcher binary, glibc's loader, namespaces.
func TestAppImageLackingTheShimsLibraryIsRefused(t *testing.T) {
	p := newPod(t, "fsdp9", "10.99.7.19", 1)
	launcher := filepath.Join(p.dir, "fstack-launcher")
	if out, err := exec.Command("go", "build", "-o", launcher, "github.com/kube-fstack/kube-fstack/dataplane-image/cmd/fstack-launcher").CombinedOutput(); err != nil {
		t.Fatalf("build the launcher: %v\n%s", err, out)
	}
	dep := filepath.Join(p.dir, "libneeded.so.1")
	must(t, os.WriteFile(filepath.Join(p.dir, "dep.c"), []byte("int needed_fn(void) { return 0; }\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(p.dir, "shim.c"), []byte("extern int needed_fn(void);\nint shim_fn(void) { return needed_fn(); }\n"), 0o644))
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-Wl,-soname,libneeded.so.1", "-o", dep, filepath.Join(p.dir, "dep.c")},
		{"-shared", "-fPIC", "-o", filepath.Join(p.imgShim, "kernel-event+multi-sc", podcontract.ShimLibrary), filepath.Join(p.dir, "shim.c"),
			"-L" + p.dir, "-l:libneeded.so.1", "-Wl,-rpath,$ORIGIN/" + podcontract.ShimLibDir, "-Wl,--enable-new-dtags"},
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	d := p.startDataplane(t, "1")
	d.waitReady(t)
	run := func() (string, int) {
		args := append([]string{"--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private", "--", "sh", "-c", containerScript, "sh"},
			p.appArgs("app", "")...)
		args = append(append(args, "timeout", "60", "env"), injectedAppEnv(t, p)...)
		out, err := exec.Command("unshare", append(args, launcher, "--", "bash", "-c", "echo app-started")...).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if ee != nil {
			return string(out), ee.ExitCode()
		}
		return string(out), 0
	}
	out, code := run()
	out = logtest.Readable(out)
	if code != 78 || strings.Contains(out, "app-started") || !strings.Contains(out, "this image lacks libneeded.so.1, which F-Stack's shim needs") {
		t.Fatalf("without %s/lib: exit %d, want 78 and the missing library named before the app starts:\n%s", podcontract.ShimDir, code, out)
	}
	t.Logf("refused: %s", strings.TrimSpace(out))
	data, err := os.ReadFile(dep)
	must(t, err)
	must(t, os.MkdirAll(filepath.Join(p.shimDir, podcontract.ShimLibDir), 0o755))
	must(t, os.WriteFile(filepath.Join(p.shimDir, podcontract.ShimLibDir, "libneeded.so.1"), data, 0o755))
	out, code = run()
	out = logtest.Readable(out)
	if code != 0 || !strings.Contains(out, "app-started") || !strings.Contains(out, "libneeded.so.1 from "+podcontract.ShimDir+"/"+podcontract.ShimLibDir) {
		t.Fatalf("with the library in %s/lib: exit %d:\n%s", podcontract.ShimDir, code, out)
	}
}
