package supervisor

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func TestShimMode(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		s    fsv1.ShimSpec
		want string
	}{
		{fsv1.ShimSpec{KernelEvent: &yes, MultiSC: &yes}, "kernel-event+multi-sc"},
		{fsv1.ShimSpec{KernelEvent: &no, MultiSC: &no}, "pipeline"},
		{fsv1.ShimSpec{ThreadSocket: true, Polling: true}, "thread-socket+polling"},
	} {
		if got := ShimMode(&tc.s); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.s, got, tc.want)
		}
	}
}

func TestPlaceShim(t *testing.T) {
	yes := true
	img, shim := t.TempDir(), t.TempDir()
	mustDo(t, os.WriteFile(filepath.Join(img, podcontract.Launcher), []byte("x"), 0o755))
	mustDo(t, os.MkdirAll(filepath.Join(img, "kernel-event+multi-sc"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(img, "kernel-event+multi-sc", podcontract.ShimLibrary), []byte("lib"), 0o644))
	spec := &fsv1.ShimSpec{Enabled: &yes, KernelEvent: &yes, MultiSC: &yes}
	if _, err := placeShim(img, shim, spec, true); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(shim, podcontract.Launcher))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("launcher: %v %v (exec bits must be kept)", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(shim, podcontract.ShimLibrary)); string(b) != "lib" {
		t.Errorf("library = %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(shim, ".tmp-*")); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}

	other := &fsv1.ShimSpec{Enabled: &yes, ThreadSocket: true}
	_, err = placeShim(img, t.TempDir(), other, true)
	if err == nil || !strings.Contains(err.Error(), "no libff_syscall.so for shim mode thread-socket (it has: kernel-event+multi-sc)") {
		t.Errorf("missing mode, required: %v", err)
	}
	warn, err := placeShim(img, t.TempDir(), other, false)
	if err != nil || !strings.Contains(warn, "apps will use kernel sockets") {
		t.Errorf("missing mode, not required: %q %v", warn, err)
	}
}

// The shim's own libraries travel with it: lib/ lands beside libff_syscall.so in the shim volume,
// where its run path $ORIGIN/lib finds them (an app image without libnuma or libatomic could not
// load it otherwise); lib is not a shim mode.
func TestPlaceShimCarriesItsLibraries(t *testing.T) {
	yes := true
	img := t.TempDir()
	mode := filepath.Join(img, "multi-sc")
	mustDo(t, os.MkdirAll(mode, 0o755))
	mustDo(t, os.WriteFile(filepath.Join(mode, podcontract.ShimLibrary), []byte("lib"), 0o755))
	mustDo(t, os.MkdirAll(filepath.Join(img, podcontract.ShimLibDir), 0o755))
	mustDo(t, os.Symlink("../lib", filepath.Join(mode, podcontract.ShimLibDir)))
	for _, l := range []string{"libnuma.so.1", "libatomic.so.1"} {
		mustDo(t, os.WriteFile(filepath.Join(img, podcontract.ShimLibDir, l), []byte(l), 0o644))
	}
	spec := &fsv1.ShimSpec{Enabled: &yes, MultiSC: &yes}

	shim := t.TempDir()
	if _, err := placeShim(img, shim, spec, true); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"libnuma.so.1", "libatomic.so.1"} {
		if b, err := os.ReadFile(filepath.Join(shim, podcontract.ShimLibDir, l)); err != nil || string(b) != l {
			t.Errorf("%s in the shim volume: %q %v", l, b, err)
		}
	}

	// A pod that planted lib as a symlink out of its volume gets nothing written through it.
	shim, outside := t.TempDir(), t.TempDir()
	mustDo(t, os.Symlink(outside, filepath.Join(shim, podcontract.ShimLibDir)))
	_, err := placeShim(img, shim, spec, true)
	if err == nil || !strings.Contains(err.Error(), "the supervisor makes it") {
		t.Errorf("planted symlink: %v, want a refusal", err)
	}
	if left, _ := os.ReadDir(outside); len(left) > 0 {
		t.Errorf("written through the planted symlink: %v", left)
	}

	_, err = placeShim(img, t.TempDir(), &fsv1.ShimSpec{Enabled: &yes, ThreadSocket: true}, true)
	if err == nil || !strings.Contains(err.Error(), "(it has: multi-sc)") {
		t.Errorf("lib listed as a shim mode: %v", err)
	}
}

func TestBumpGenerationRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	mustDo(t, os.WriteFile(filepath.Join(dir, podcontract.GenerationFile), []byte("seven"), 0o644))
	if _, err := bumpGeneration(dir); err == nil {
		t.Fatal("a non-numeric generation was overwritten silently")
	}
}

// A socket left by a killed primary is removed; a served socket and a non-socket are refused
// and stay.
func TestClearStaleSocket(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false) // as a SIGKILLed DPDK leaves it
	_ = l.Close()
	if err := clearStaleSocket(stale); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale socket still there: %v", err)
	}
	if err := clearStaleSocket(stale); err != nil {
		t.Fatalf("a missing socket is not an error: %v", err)
	}

	served := filepath.Join(dir, "served.sock")
	l2, err := net.Listen("unix", served)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l2.Close() }()
	if err := clearStaleSocket(served); err == nil || !strings.Contains(err.Error(), "served by another process") {
		t.Fatalf("served socket: %v", err)
	}
	if _, err := os.Lstat(served); err != nil {
		t.Fatalf("a served socket was removed: %v", err)
	}

	file := filepath.Join(dir, "file.sock")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := clearStaleSocket(file); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Fatalf("regular file: %v", err)
	}
}
