package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/appprobe"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/readiness"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// The supervisor runs as root and reads files the app containers can write: the DPDK runtime
// directory (their secondaries write it), the app-state volume (their launchers do), and before
// the shim volume was read-only to them, the shim dir. A FIFO planted at any of them blocked a
// plain open or read until a writer came: the supervisor's start, its readiness or its app
// probes stopped for good. Each reader must return, refusing what is not a small regular file
// and naming it.

// mustReturn runs f and fails if it never returns; the failure mode is a hang, so the bound is
// generous and no statement about speed.
func mustReturn(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never returned: a planted FIFO blocked the supervisor", what)
	}
}

func fifo(t *testing.T, path string) {
	t.Helper()
	mustDo(t, os.MkdirAll(filepath.Dir(path), 0o755))
	mustDo(t, unix.Mkfifo(path, 0o644))
}

func TestAFIFOAsTheGenerationIsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo(t, filepath.Join(dir, podcontract.GenerationFile))
	var err error
	mustReturn(t, "bumpGeneration", func() { _, err = bumpGeneration(dir) })
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, podcontract.GenerationFile)) || !strings.Contains(err.Error(), "a FIFO") {
		t.Fatalf("got %v, want the FIFO refused by name", err)
	}
}

func TestASymlinkOrOversizeGenerationIsRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	mustDo(t, os.WriteFile(target, []byte("41\n"), 0o644))
	mustDo(t, os.Symlink(target, filepath.Join(dir, podcontract.GenerationFile)))
	if _, err := bumpGeneration(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a symlinked generation: %v", err)
	}
	mustDo(t, os.Remove(filepath.Join(dir, podcontract.GenerationFile)))
	mustDo(t, os.WriteFile(filepath.Join(dir, podcontract.GenerationFile), []byte(strings.Repeat("1", 4096)), 0o644))
	if _, err := bumpGeneration(dir); err == nil || !strings.Contains(err.Error(), "at most 32 bytes") {
		t.Fatalf("an oversize generation: %v", err)
	}
}

// An app's secondary can write /var/run/dpdk: a FIFO as the primary's config, or as one of its
// fbarray files, must not stop the readiness check or the wait for old secondaries.
func TestAFIFOInTheRuntimeDirIsRefused(t *testing.T) {
	rd := t.TempDir()
	fifo(t, filepath.Join(rd, "rte", "config"))
	fifo(t, filepath.Join(rd, "rte", "fbarray_memzone"))
	var err error
	mustReturn(t, "primaryState", func() { err = readiness.PrimaryState(rd, "rte") })
	if err == nil || !strings.Contains(err.Error(), filepath.Join(rd, "rte", "config")) || !strings.Contains(err.Error(), "a FIFO") {
		t.Fatalf("primaryState: %v, want the FIFO refused by name", err)
	}
	var held []string
	mustReturn(t, "heldRuntimeFiles", func() { held = heldRuntimeFiles(filepath.Join(rd, "rte")) })
	if len(held) != 0 {
		t.Fatalf("held %v: a FIFO is no primary's file", held)
	}
}

// The app-state volume is the launchers': a FIFO as a container's restart request or its
// app-broken marker neither blocks the context watch nor the app probes, and a request that
// names another container's directory is that directory's.
func TestAFIFOInTheAppStateVolumeIsRefused(t *testing.T) {
	state, shim := t.TempDir(), t.TempDir()
	fifo(t, filepath.Join(state, "nginx", shimctx.RequestFile))
	fifo(t, filepath.Join(state, "nginx", podcontract.AppBrokenFile))
	var log strings.Builder
	s := New(Config{AppProbes: `{"/app-probe/nginx/liveness":{"port":80,"timeoutSeconds":1}}`,
		Paths: facts.Paths{ShimDir: shim, AppStateDir: state}}, nil, &log)
	w := &contextWatch{s: s, gen: 1}
	st := &shimctx.State{Generation: 1, Instances: []shimctx.Instance{{Free: 0, Capacity: 32}}}
	var honoured bool
	mustReturn(t, "the restart request's read", func() { honoured = w.justified(st) })
	if honoured || !strings.Contains(log.String(), "ignoring a restart request") || !strings.Contains(log.String(), "a FIFO") {
		t.Fatalf("honoured %v; log:\n%s", honoured, log.String())
	}
	if _, err := os.Lstat(filepath.Join(state, "nginx", shimctx.RequestFile)); !os.IsNotExist(err) {
		t.Fatalf("the FIFO request stayed: %v", err)
	}
	var why string
	mustReturn(t, "the app-broken marker's read", func() { why = appprobe.Broken(s.Cfg.Paths.AppStateDir, "/app-probe/nginx/liveness") })
	if !strings.Contains(why, "cannot be read") || !strings.Contains(why, "a FIFO") {
		t.Fatalf("app probe: %q", why)
	}

	// "web" writes a request naming "nginx": it is web's, and the decline answers web.
	mustDo(t, os.MkdirAll(filepath.Join(state, "web"), 0o755))
	mustDo(t, shimctx.Write(filepath.Join(state, "web"), shimctx.RequestFile, &shimctx.Request{Generation: 1, Container: "nginx", Need: []int{1}, Asked: 7}))
	st.Instances[0].Free = 32
	if w.justified(st) {
		t.Fatal("a request was honoured with every context free")
	}
	if r, err := shimctx.ReadDeclined(shim, "web"); err != nil || r.Asked != 7 {
		t.Fatalf("web's decline: %+v %v", r, err)
	}
	if _, err := shimctx.ReadDeclined(shim, "nginx"); !os.IsNotExist(err) {
		t.Fatalf("a decline was written in nginx's name: %v", err)
	}
}
