package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// fakeSupervisor plays the supervisor's side of shimctx in the shim dir: it publishes a reading
// of free[gen] every few milliseconds and, when honour is set, answers a restart request with a
// new generation whose zones are fresh.
type fakeSupervisor struct {
	dir      string
	state    string // the app-state volume
	free     atomic.Int32
	honour   bool
	decline  atomic.Bool
	restarts atomic.Int32
	declined atomic.Int32
	stop     chan struct{}
}

func startFakeSupervisor(t *testing.T, l *Launcher, free int, honour bool) *fakeSupervisor {
	dir := l.ShimDir
	f := &fakeSupervisor{dir: dir, state: filepath.Dir(l.StateDir), honour: honour, stop: make(chan struct{})}
	f.free.Store(int32(free))
	// As the supervisor does, a first reading before ready (older than the launcher's start,
	// so the launcher waits for a fresh one).
	st := &shimctx.State{Generation: 1, ReadAt: shimctx.Now() - int64(time.Hour), Source: "test", Instances: []shimctx.Instance{{Free: 32, Capacity: 32}}}
	if err := shimctx.Write(dir, shimctx.StateFile, st); err != nil {
		t.Fatal(err)
	}
	ready(t, dir, "1")
	done := make(chan struct{})
	go f.run(done)
	t.Cleanup(func() { close(f.stop); <-done })
	return f
}

func (f *fakeSupervisor) run(done chan struct{}) {
	defer close(done)
	gen := 1
	for {
		select {
		case <-f.stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
		st := &shimctx.State{Generation: gen, ReadAt: shimctx.Now(), Source: "test", Instances: []shimctx.Instance{{Free: int(f.free.Load()), Capacity: 32}}}
		_ = shimctx.Write(f.dir, shimctx.StateFile, st)
		if r, err := shimctx.ReadRequest(f.state, "nginx"); err == nil && f.decline.Load() && r.Generation == gen {
			// Contexts came back meanwhile: the supervisor's answer, in the shim dir.
			f.free.Store(32)
			_ = shimctx.Remove(f.state, "nginx/"+shimctx.RequestFile)
			_ = shimctx.Decline(f.dir, r)
			f.declined.Add(1)
			continue
		}
		if r, err := shimctx.ReadRequest(f.state, "nginx"); err == nil && f.honour && r.Generation == gen {
			// The supervisor's order: readiness, state and request go, F-Stack restarts
			// (which takes a while), then the new generation, its first reading, ready.
			_ = os.Remove(filepath.Join(f.dir, podcontract.ReadyFile))
			_ = shimctx.Remove(f.dir, shimctx.StateFile)
			_ = shimctx.Remove(f.state, "nginx/"+shimctx.RequestFile)
			time.Sleep(100 * time.Millisecond)
			gen++
			f.free.Store(32)
			f.restarts.Add(1)
			_ = os.WriteFile(filepath.Join(f.dir, podcontract.GenerationFile), []byte(strconv.Itoa(gen)+"\n"), 0o644)
			_ = shimctx.Write(f.dir, shimctx.StateFile, &shimctx.State{Generation: gen, ReadAt: shimctx.Now(), Source: "test", Instances: []shimctx.Instance{{Free: 32, Capacity: 32}}})
			_ = os.WriteFile(filepath.Join(f.dir, podcontract.ReadyFile), []byte(strconv.Itoa(gen)+"\n"), 0o644)
		}
	}
}

func TestStartsWhenEnoughContextsAreFree(t *testing.T) {
	l, _, log := newTest(t, 0)
	sup := startFakeSupervisor(t, l, 1, true)
	if code := l.Run(context.Background(), []string{"true"}); code != 0 {
		t.Fatalf("exit code %d; log:\n%s", code, log)
	}
	if sup.restarts.Load() != 0 || !hasLine(t, log.String(), "shim contexts", "free", "[1/32]", "need", "[1]") {
		t.Fatalf("restarts %d; log:\n%s", sup.restarts.Load(), log)
	}
}

// The app's previous runs leaked every context: the launcher gets the dataplane restarted and
// starts the app against the new generation, never against the exhausted one.
func TestAsksForADataplaneRestartWhenShort(t *testing.T) {
	l, dir, log := newTest(t, 0)
	sup := startFakeSupervisor(t, l, 0, true)
	out := filepath.Join(dir, "started")
	if code := l.Run(context.Background(), []string{"sh", "-c", "touch " + out}); code != 0 {
		t.Fatalf("exit code %d; log:\n%s", code, log)
	}
	if sup.restarts.Load() != 1 {
		t.Fatalf("dataplane restarts %d, want 1; log:\n%s", sup.restarts.Load(), log)
	}
	if rec, _ := os.ReadFile(filepath.Join(l.StateDir, podcontract.AppStartedFile)); strings.TrimSpace(string(rec)) != "2" {
		t.Fatalf("the app started against generation %q, want the restarted 2", rec)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("the app did not run: %v", err)
	}
	if !strings.Contains(readable(t, log.String()), "instance 0: 0 free, 1 needed") {
		t.Errorf("the log does not say why:\n%s", log)
	}
}

// A dataplane that does not restart (an older supervisor, or one that disagrees) never gets
// the app started on kernel sockets: the launcher gives up, the kubelet restarts it.
func TestNeverStartsShortOfContexts(t *testing.T) {
	l, dir, log := newTest(t, 0)
	l.WaitTimeout = 300 * time.Millisecond
	startFakeSupervisor(t, l, 0, false)
	out := filepath.Join(dir, "started")
	if code := l.Run(context.Background(), []string{"sh", "-c", "touch " + out}); code != 1 {
		t.Fatalf("exit code %d, want 1; log:\n%s", code, log)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the app ran although its instance had no free shim context")
	}
	if !strings.Contains(readable(t, log.String()), "did not restart within") {
		t.Errorf("log:\n%s", log)
	}
}

// Nginx's need: the master and each worker, on the instance the shim maps worker i to.
func TestNginxNeedsAContextPerWorker(t *testing.T) {
	l, dir, _ := newTest(t, 0, 1)
	fakeNginx(t, l, dir, "", "worker_processes 3;\n"+goodConf)
	l.Getenv = func(k string) string { return map[string]string{podcontract.EnvInstances: "2"}[k] }
	a, err := l.prepareApp(context.Background(), []string{filepath.Join(dir, "bin", "nginx")})
	if err != nil {
		t.Fatal(err)
	}
	// The master on instance 0 (FF_PROC_ID 0); workers 0 and 2 on instance 0, worker 1 on 1.
	if len(a.need) != 2 || a.need[0] != 3 || a.need[1] != 2 {
		t.Fatalf("need %v, want [3 2]", a.need)
	}
}

// A request the supervisor declines (its reading shows enough contexts now) is answered in the
// shim dir, which the launcher cannot write: the launcher takes the answer to its own request
// (matched by when it asked) and checks again, without a restart.
func TestADeclinedRequestIsCheckedAgain(t *testing.T) {
	l, dir, log := newTest(t, 0)
	// An answer to an earlier request of the same generation must not be taken for this one's.
	if err := shimctx.Decline(dir, &shimctx.Request{Generation: 1, Container: "nginx", Need: []int{1}, Asked: 1}); err != nil {
		t.Fatal(err)
	}
	sup := startFakeSupervisor(t, l, 0, false)
	sup.decline.Store(true)
	if code := l.Run(context.Background(), []string{"true"}); code != 0 {
		t.Fatalf("exit code %d; log:\n%s", code, log)
	}
	if sup.declined.Load() != 1 || sup.restarts.Load() != 0 || !strings.Contains(readable(t, log.String()), "the dataplane declined the restart") {
		t.Fatalf("declined %d, restarts %d; log:\n%s", sup.declined.Load(), sup.restarts.Load(), log)
	}
}
