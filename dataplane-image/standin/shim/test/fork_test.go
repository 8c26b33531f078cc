// Package shimtest tests the stand-in libff_syscall.so (dataplane-image/standin/shim), the
// LD_PRELOAD library the stand-in image carries in place of F-Stack's shim. What is real: the
// library built by its own build.sh, gcc, the kernel's fork and signals. What it stands in for
// is in each C file's comment.
package shimtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// lib builds the stand-in library for mode.
func lib(t *testing.T, mode string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatal("gcc is needed to build the stand-in shim: hack/install-deps.sh installs it (build-essential)")
	}
	out := filepath.Join(t.TempDir(), "libff_syscall.so")
	if b, err := exec.Command("../build.sh", out, mode).CombinedOutput(); err != nil {
		t.Fatalf("build.sh %s: %v\n%s", mode, err, b)
	}
	return out
}

// forker builds testdata/forker.c (an Nginx master as the fork hook sees it).
func forker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "forker")
	if b, err := exec.Command("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, "testdata/forker.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc forker.c: %v\n%s", err, b)
	}
	return bin
}

// slots makes the runtime directory with instance 0's 32 free context slots, as the supervisor
// (--shim-contexts=standin) does at each generation: only a process holding one is F-Stack's.
func slots(t *testing.T) string {
	t.Helper()
	rt := t.TempDir()
	dir := filepath.Join(rt, "dpdk", "rte")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// 32 slot bytes and a 16-byte holder record per slot (slots.go).
	if err := os.WriteFile(filepath.Join(dir, "kube_fstack_standin_contexts_0"), make([]byte, 32+32*16), 0o644); err != nil {
		t.Fatal(err)
	}
	return rt
}

// run runs forker under the library and returns its lines and stderr.
func run(t *testing.T, bin, so, rt, sockets, forks string) ([]string, string) {
	t.Helper()
	cmd := exec.Command(bin, sockets, forks)
	cmd.Env = append(os.Environ(), podcontract.EnvPreload+"="+so, "RUNTIME_DIRECTORY="+rt, podcontract.EnvShimInstances+"=1",
		podcontract.EnvShimProcID+"=0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("forker %s %s: %v\n%s", sockets, forks, err, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n"), stderr.String()
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func same(a, b []string) bool {
	return strings.Join(a, "|") == strings.Join(b, "|")
}

// Under FF_MULTI_SC the master's forks get its sockets' contexts in turn: one fork per socket
// lives, every later child dies with SIGSEGV at once (a respawned Nginx worker, docs/fstack-rules.md §6),
// and after 44 of those fork() fails, leaving the master without workers.
func TestMultiSCForkPastTheContextsSegfaults(t *testing.T) {
	bin, rt := forker(t), slots(t)
	for _, mode := range []string{"kernel-event+multi-sc", "multi-sc", "multi-sc+polling"} {
		so := lib(t, mode)
		got, stderr := run(t, bin, so, rt, "1", "3")
		if want := []string{"ok", "signal 11", "signal 11"}; !same(got, want) {
			t.Errorf("%s, 1 socket, 3 forks: %q, want %q\n%s", mode, got, want, stderr)
		}
		for _, say := range []string{"(not F-Stack) for mode " + mode, "fork 1 gets shim context 1 of the 1", "dies with SIGSEGV at once"} {
			if !strings.Contains(stderr, say) {
				t.Errorf("%s: the stand-in does not say %q:\n%s", mode, say, stderr)
			}
		}
		if got, _ := run(t, bin, so, rt, "2", "3"); !same(got, []string{"ok", "ok", "signal 11"}) {
			t.Errorf("%s, 2 sockets, 3 forks: %q, want two workers and a fault", mode, got)
		}
	}
	got, stderr := run(t, bin, lib(t, "kernel-event+multi-sc"), rt, "1", "50")
	want := append(append([]string{"ok"}, repeat("signal 11", 44)...), repeat("fork failed: 11", 5)...)
	if !same(got, want) {
		t.Errorf("1 socket, 50 forks: %q, want 1 ok, 44 faults, then EAGAIN", got)
	}
	if !strings.Contains(stderr, "fork() now fails (EAGAIN)") {
		t.Errorf("the stand-in does not say why fork failed:\n%s", stderr)
	}
}

// Without FF_MULTI_SC, in a process that opened no socket, and in one that fell back to kernel
// sockets (no context slot), fork is untouched.
func TestForkUntouchedElsewhere(t *testing.T) {
	bin, rt := forker(t), slots(t)
	for _, mode := range []string{"kernel-event", "pipeline", "thread-socket"} {
		if got, stderr := run(t, bin, lib(t, mode), rt, "1", "3"); !same(got, repeat("ok", 3)) {
			t.Errorf("%s: %q, want every child alive\n%s", mode, got, stderr)
		}
	}
	so := lib(t, "multi-sc")
	if got, _ := run(t, bin, so, rt, "0", "3"); !same(got, repeat("ok", 3)) {
		t.Errorf("multi-sc, no socket: %q, want every child alive (a shell forking the app is no master)", got)
	}
	if got, _ := run(t, bin, so, t.TempDir(), "1", "3"); !same(got, repeat("ok", 3)) {
		t.Errorf("multi-sc, no context slot file: %q, want every child alive (kernel sockets are not F-Stack's)", got)
	}
}

func TestBuildRefusesAnUnknownMode(t *testing.T) {
	b, err := exec.Command("../build.sh", filepath.Join(t.TempDir(), "x.so"), "multisc").CombinedOutput()
	if err == nil || !strings.Contains(string(b), "unknown shim mode 'multisc'") || !strings.Contains(string(b), "kernel-event+multi-sc") {
		t.Fatalf("build.sh with mode multisc: %v %q, want a refusal naming it and the modes", err, b)
	}
}
