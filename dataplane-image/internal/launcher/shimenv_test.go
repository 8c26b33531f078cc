package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// childEnvOf runs `env` as the app through the launcher, with the container's environment as
// given (nothing else of the shim's in it), and returns the app's environment as entries.
func childEnvOf(t *testing.T, l *Launcher, container map[string]string) []string {
	t.Helper()
	for _, n := range append(podcontract.ShimEnvNames(), podcontract.EnvInstances) {
		t.Setenv(n, "")
		os.Unsetenv(n)
	}
	for k, v := range container {
		t.Setenv(k, v)
	}
	out := filepath.Join(t.TempDir(), "env")
	var log strings.Builder
	l.Log = &log
	if code := l.Run(context.Background(), []string{"sh", "-c", "env > " + out}); code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, log.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func entries(env []string, name string) []string {
	var out []string
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			out = append(out, strings.TrimPrefix(e, name+"="))
		}
	}
	return out
}

func wantEnv(t *testing.T, env []string, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := entries(env, name); len(got) != 1 || got[0] != v {
			t.Errorf("the app's %s: %q, want once %q", name, got, v)
		}
	}
}

// The injection puts only FSTACK_SHIM_INSTANCES in the container's environment; the app gets
// the shim's variables from the launcher.
func TestTheAppGetsTheShimVariables(t *testing.T) {
	b := build(t)
	l, _, _ := newTest(t, 5, 7)
	placeShim(t, l, b, b.dep)
	lib := filepath.Join(l.ShimDir, podcontract.ShimLibrary)
	env := childEnvOf(t, l, map[string]string{podcontract.EnvInstances: "2"})
	wantEnv(t, env, map[string]string{
		podcontract.EnvPreload: lib, podcontract.EnvShimInstances: "2", podcontract.EnvShimProcID: "0", podcontract.EnvShimInitialLcore: "0x20",
	})
	if got := entries(env, podcontract.EnvInstances); len(got) != 0 {
		t.Errorf("the app still has %s=%q", podcontract.EnvInstances, got)
	}
}

// The app's own LD_PRELOAD comes after the shim's, so the shim's hooks come first.
func TestTheAppsOwnPreloadFollowsTheShim(t *testing.T) {
	b := build(t)
	l, _, _ := newTest(t, 1)
	placeShim(t, l, b, b.dep)
	lib := filepath.Join(l.ShimDir, podcontract.ShimLibrary)
	env := childEnvOf(t, l, map[string]string{podcontract.EnvInstances: "1", podcontract.EnvPreload: b.dep})
	wantEnv(t, env, map[string]string{podcontract.EnvPreload: lib + ":" + b.dep})
}

// A pod from an older injection has the shim's variables in its container's environment: the
// app gets each once, and the shim once.
func TestAPodFromAnOlderInjectionGetsOneShim(t *testing.T) {
	b := build(t)
	l, _, _ := newTest(t, 3)
	placeShim(t, l, b, b.dep)
	lib := filepath.Join(l.ShimDir, podcontract.ShimLibrary)
	env := childEnvOf(t, l, map[string]string{
		podcontract.EnvPreload: lib, podcontract.EnvShimInstances: "4", podcontract.EnvShimProcID: "0", podcontract.EnvShimInitialLcore: "0x4",
	})
	wantEnv(t, env, map[string]string{
		podcontract.EnvPreload: lib, podcontract.EnvShimInstances: "4", podcontract.EnvShimProcID: "0", podcontract.EnvShimInitialLcore: "0x8",
	})
}

// Without a shim library in the volume (an image without the spec's mode, allowed by
// --require-shim=false) the app runs without a preload and the log says so.
func TestWithoutAShimLibraryTheAppPreloadsNothing(t *testing.T) {
	l, dir, _ := newTest(t, 1)
	write(t, dir, podcontract.GenerationFile, "1\n")
	write(t, dir, podcontract.ReadyFile, "1\n")
	env := childEnvOf(t, l, map[string]string{podcontract.EnvInstances: "1"})
	if got := entries(env, podcontract.EnvPreload); len(got) != 0 {
		t.Fatalf("%s=%q without a shim library", podcontract.EnvPreload, got)
	}
}

// A process count that is not one is refused before anything waits, naming the variable.
func TestABadProcessCountIsRefused(t *testing.T) {
	for _, v := range []string{"two", "0", "65", "-1"} {
		l, _, log := newTest(t, 1)
		l.Getenv = func(k string) string { return map[string]string{podcontract.EnvInstances: v}[k] }
		if code := l.Run(context.Background(), []string{"true"}); code != ExitConfig || !strings.Contains(readable(t, log.String()), podcontract.EnvInstances+`="`+v+`" is not a number of F-Stack processes`) {
			t.Errorf("%s=%s: exit %d; log:\n%s", podcontract.EnvInstances, v, code, log)
		}
	}
}

// The launcher is the one place the app's CPU is known, so it is where the shim's lcore bound is
// held: a container whose first CPU is above podcontract.MaxShimLcore is refused (the shim would
// move the app to CPU 2 and, outside its cpuset, fall back to kernel sockets), CPU 50 is named.
func TestACPUTheShimCannotNameIsRefused(t *testing.T) {
	b := build(t)
	for _, cpus := range [][]int{{51}, {60, 61}} {
		l, _, log := newTest(t, cpus...)
		placeShim(t, l, b, b.dep)
		l.Getenv = func(k string) string { return map[string]string{podcontract.EnvInstances: "1"}[k] }
		code := l.Run(context.Background(), []string{"true"})
		want := fmt.Sprintf("first CPU is %d, but the shim's %s names only CPUs 0-50", cpus[0], podcontract.EnvShimInitialLcore)
		if code != ExitConfig || !strings.Contains(log.String(), want) {
			t.Errorf("CPUs %v: exit %d, want %d and %q; log:\n%s", cpus, code, ExitConfig, want, log)
		}
	}
	l, _, _ := newTest(t, 50, 51)
	placeShim(t, l, b, b.dep)
	env := childEnvOf(t, l, map[string]string{podcontract.EnvInstances: "1"})
	wantEnv(t, env, map[string]string{podcontract.EnvShimInitialLcore: "0x4000000000000"})
}
