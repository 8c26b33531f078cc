package supervisor

import (
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

func TestBumpGenerationRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	mustDo(t, os.WriteFile(filepath.Join(dir, podcontract.GenerationFile), []byte("seven"), 0o644))
	if _, err := bumpGeneration(dir); err == nil {
		t.Fatal("a non-numeric generation was overwritten silently")
	}
}
