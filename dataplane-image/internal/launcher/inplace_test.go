package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/syncbuf"
)

// inPlace is newTest with a restart budget and a log safe to read while Run runs.
func inPlace(t *testing.T, max int) (*Launcher, string, *syncbuf.Buffer) {
	t.Helper()
	l, dir, _ := newTest(t, 0, 1)
	log := &syncbuf.Buffer{}
	l.Log, l.MaxRestarts, l.RestartWindow = log, max, time.Hour
	l.QuitGrace, l.TermGrace, l.MovedGrace = time.Second, time.Second, time.Second
	return l, dir, log
}

func lines(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Fields(string(b))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func record(t *testing.T, l *Launcher) *podcontract.Restarts {
	t.Helper()
	r, err := podcontract.ReadAppRestarts(filepath.Dir(l.StateDir), l.Container)
	if err != nil || r == nil {
		t.Fatalf("the launcher's restart record: %+v, %v", r, err)
	}
	return r
}

// When the dataplane's generation moves the app is stopped, and started again in the same
// launcher once the new generation is ready: not before (a secondary of a primary that is not
// up yet hangs), and without exiting 75 into the kubelet's back-off, as it did on main.
func TestRestartsTheAppWhenTheGenerationMoves(t *testing.T) {
	l, dir, log := inPlace(t, 5)
	ready(t, dir, "1")
	starts := filepath.Join(dir, "starts")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan int, 1)
	go func() {
		res <- l.Run(ctx, []string{"sh", "-c", "cat " + filepath.Join(dir, podcontract.ReadyFile) + " >> " + starts + "; exec sleep 60"})
	}()
	waitFor(t, "the first start", func() bool { return len(lines(starts)) == 1 })
	write(t, dir, podcontract.GenerationFile, "2\n") // the new generation starts; not ready yet
	waitFor(t, "the app stopped", func() bool { return strings.Contains(readable(t, log.String()), "the dataplane restarted") })
	time.Sleep(300 * time.Millisecond)
	if n := len(lines(starts)); n != 1 {
		t.Fatalf("the app started again before the new generation was ready: %v", lines(starts))
	}
	write(t, dir, podcontract.ReadyFile, "2\n")
	waitFor(t, "the second start", func() bool { return len(lines(starts)) == 2 })
	if got := lines(starts); got[1] != "2" {
		t.Errorf("starts saw ready %v, want the second against generation 2", got)
	}
	r := record(t, l)
	if r.Total != 1 || r.ByReason[podcontract.AppRestartDataplane] != 1 || r.Last == nil || !strings.Contains(r.Last.Message, "from 1 to 2") {
		t.Errorf("record %+v", r)
	}
	if g, _ := os.ReadFile(filepath.Join(l.StateDir, podcontract.AppStartedFile)); strings.TrimSpace(string(g)) != "2" {
		t.Errorf("recorded generation %q, want 2", g)
	}
	cancel()
	if code := <-res; code == ExitDataplaneRestarted {
		t.Errorf("exit %d after the stop", code)
	}
}

// An app that exits or is killed on its own is started again; its exit 0 ends the launcher
// (the app finished: the pod's restartPolicy decides).
func TestRestartsAnAppThatExitsOrIsKilled(t *testing.T) {
	l, dir, log := inPlace(t, 5)
	ready(t, dir, "1")
	starts := filepath.Join(dir, "starts")
	script := `echo x >> ` + starts + `; n=$(wc -l < ` + starts + `)
case $n in 1) exit 3;; 2) kill -9 $$;; esac
exit 0`
	if code := l.Run(context.Background(), []string{"sh", "-c", script}); code != 0 {
		t.Fatalf("exit %d, want the app's final 0; log:\n%s", code, log)
	}
	if n := len(lines(starts)); n != 3 {
		t.Fatalf("%d starts, want 3", n)
	}
	r := record(t, l)
	if r.Total != 2 || r.ByReason[podcontract.AppRestartExited] != 2 || r.Last == nil || r.Last.Message != "the app exited: killed by signal killed" {
		t.Errorf("record %+v (last %+v)", r, r.Last)
	}
	if !strings.Contains(readable(t, log.String()), "restarting the app in place cause=the app exited: exit status 3 reason=exited restarts=1") {
		t.Errorf("no log line per restart:\n%s", readable(t, log.String()))
	}
	// The count goes on in the container's next run (its record is in the app-state volume).
	l2, _, _ := inPlace(t, 1)
	l2.StateDir, l2.ShimDir = l.StateDir, l.ShimDir
	if code := l2.Run(context.Background(), []string{"sh", "-c", "exit 5"}); code != 5 || record(t, l2).Total != 3 {
		t.Errorf("the next run: exit %d, record %+v; want 5 and the count going on from 2 to 3", code, record(t, l2))
	}
}

// A crash loop spends the budget: after MaxRestarts restarts within the window the launcher
// exits with the app's code, so that the kubelet's restart count and back-off show it.
func TestAppCrashLoopSpendsTheBudget(t *testing.T) {
	l, dir, log := inPlace(t, 2)
	ready(t, dir, "1")
	starts := filepath.Join(dir, "starts")
	if code := l.Run(context.Background(), []string{"sh", "-c", "echo x >> " + starts + "; exit 3"}); code != 3 {
		t.Fatalf("exit %d, want the app's 3", code)
	}
	if n := len(lines(starts)); n != 3 {
		t.Errorf("%d starts, want 3 (2 in place)", n)
	}
	if !strings.Contains(readable(t, log.String()), "2 restarts within 1h0m0s already, a crash loop") {
		t.Errorf("the log does not say why it exits:\n%s", readable(t, log.String()))
	}
	if r := record(t, l); r.Total != 2 {
		t.Errorf("record %+v", r)
	}
}

// reloadNginx is a stand-in for Nginx's master. It notes its start with its configuration's
// version (events: "start PID VERSION"), writes its pid where the configuration's pid directive
// says, notes the version in starts and forks its two workers, as nginx does in that order; on
// SIGQUIT (SIGTERM) it notes "quit PID" ("term PID"), stops its workers and leaves, removing
// its pid file as nginx does whatever the file holds by then. A version starting with "hang"
// makes a master that never gets past its start (as one stuck in its EAL initialisation, deaf
// to SIGQUIT), one starting with "exit" a master that exits 1 once it wrote its pid file (as one
// that cannot bind its port).
func reloadNginx(t *testing.T, l *Launcher, dir string) (bin, starts, events, pidPath string) {
	t.Helper()
	starts, events, pidPath = filepath.Join(dir, "starts"), filepath.Join(dir, "events"), filepath.Join(dir, "nginx.pid")
	conf := filepath.Join(dir, "nginx.conf")
	bin = fakeNginx(t, l, dir, `v=$(head -1 `+conf+` | tr -d '# ')
echo "start $$ $v" >> `+events+`
case $v in
hang*) trap '' QUIT; exec sleep 1000 ;;
exit*) echo $$ > `+pidPath+`; exit 1 ;;
esac
trap 'echo "quit $$" >> `+events+`; kill $w1 $w2 2>/dev/null; rm -f `+pidPath+`; exit 0' QUIT
trap 'echo "term $$" >> `+events+`; kill $w1 $w2 2>/dev/null; rm -f `+pidPath+`; exit 0' TERM
echo $$ > `+pidPath+`
echo $v >> `+starts+`
sleep 1000 & w1=$!
sleep 1000 & w2=$!
while :; do wait; done
`, "# v1\npid "+pidPath+";\n"+goodConf)
	return bin, starts, events, pidPath
}

// reloadable is a launcher running reloadNginx's stand-in with a restart budget and its worker
// watch on, its configuration always passing nginx -t.
type reloadable struct {
	l                       *Launcher
	dir                     string
	log                     *syncbuf.Buffer
	starts, events, pidPath string
	res                     chan int
	cancel                  context.CancelFunc
	self                    string // the launcher's pid, as nginx's pid file holds it once taken over
}

// runReloadable starts it; setup, when given, adjusts the launcher first.
func runReloadable(t *testing.T, budget int, setup ...func(*Launcher)) *reloadable {
	t.Helper()
	l, dir, log := inPlace(t, budget)
	l.NginxTest = func(context.Context, []string) error { return nil }
	l.MinWorkerAge, l.WorkerSettle, l.ReloadWait = 200*time.Millisecond, time.Second, 5*time.Second
	ready(t, dir, "1")
	bin, starts, events, pidPath := reloadNginx(t, l, dir)
	for _, f := range setup {
		f(l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res, done := make(chan int, 1), make(chan struct{})
	go func() {
		defer close(done)
		res <- l.Run(ctx, []string{bin})
	}()
	// A test that fails midway leaves no Nginx stand-in behind.
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &reloadable{l: l, dir: dir, log: log, starts: starts, events: events, pidPath: pidPath, res: res, cancel: cancel, self: strconv.Itoa(os.Getpid())}
}

// `nginx -s reload` signals the pid in nginx's pid file, which the launcher has taken over: the
// new configuration is judged, and nginx is restarted in place with it; a configuration the
// shim cannot run is refused and the running nginx keeps serving. On main the SIGHUP went to
// the master, whose re-forked workers under the shim serve nothing.
func TestReloadRestartsNginxInPlaceWithTheNewConfiguration(t *testing.T) {
	rl := runReloadable(t, 5)
	l, dir, log, starts, pidPath, res, cancel, self := rl.l, rl.dir, rl.log, rl.starts, rl.pidPath, rl.res, rl.cancel, rl.self
	defer cancel()
	waitFor(t, "the launcher's pid in nginx's pid file", func() bool { return strings.Join(lines(pidPath), "") == self })

	// What `nginx -s reload` does: SIGHUP to the pid in the file.
	write(t, dir, "nginx.conf", "# v2\npid "+pidPath+";\n"+goodConf)
	reload := func() {
		pid, err := strconv.Atoi(strings.Join(lines(pidPath), ""))
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	reload()
	waitFor(t, "nginx started again with v2", func() bool { return strings.Join(lines(starts), " ") == "v1 v2" })
	waitFor(t, "the pid file taken over again", func() bool { return strings.Join(lines(pidPath), "") == self })
	// Recorded once the old Nginx is gone.
	waitFor(t, "the reload recorded", func() bool {
		r, _ := podcontract.ReadAppRestarts(filepath.Dir(l.StateDir), l.Container)
		return r != nil && r.Total > 0
	})
	r := record(t, l)
	if r.Total != 1 || r.ByReason[podcontract.AppRestartReload] != 1 {
		t.Errorf("record %+v", r)
	}

	// A refused configuration: nginx goes on with v2, nothing restarts.
	write(t, dir, "nginx.conf", "# v3\npid "+pidPath+";\nevents {}\nhttp { sendfile on; server { listen 80 reuseport; } }\n")
	reload()
	waitFor(t, "the refusal logged", func() bool {
		return strings.Contains(readable(t, log.String()), "reload: the new configuration is refused; nginx keeps serving")
	})
	time.Sleep(300 * time.Millisecond)
	if got := strings.Join(lines(starts), " "); got != "v1 v2" {
		t.Errorf("starts %q after a refused reload, want nginx left running", got)
	}
	select {
	case code := <-res:
		t.Fatalf("the launcher exited %d on a refused reload", code)
	default:
	}
	cancel()
	<-res
	if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
		t.Errorf("the pid file outlived nginx and the launcher: %v", err)
	}
}

// A reloader that signals the master itself (not through the pid file): the master forks new
// workers beside the old ones, which the worker watch sees, and nginx is restarted in place.
func TestReloadOfTheMasterItselfIsCaught(t *testing.T) {
	l, dir, log := inPlace(t, 5)
	l.MinWorkerAge, l.WorkerSettle = 200*time.Millisecond, 5*time.Second
	l.QuitGrace, l.TermGrace = 300*time.Millisecond, 300*time.Millisecond
	ready(t, dir, "1")
	starts, master := filepath.Join(dir, "starts"), filepath.Join(dir, "master")
	bin := fakeNginx(t, l, dir, `echo $$ > `+master+`; echo x >> `+starts+`
sleep 1000 & w1=$!
sleep 1000 & w2=$!
trap 'sleep 1000 & sleep 1000 &' HUP
trap 'kill $w1 $w2; exit 0' QUIT
while :; do wait; done
`, goodConf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan int, 1)
	go func() { res <- l.Run(ctx, []string{bin}) }()
	waitFor(t, "the workers up and watched", func() bool { return len(lines(starts)) == 1 && len(lines(master)) == 1 })
	time.Sleep(time.Second) // both workers older than MinWorkerAge: the full set
	pid, _ := strconv.Atoi(lines(master)[0])
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "nginx started again", func() bool { return len(lines(starts)) == 2 })
	if r := record(t, l); r.ByReason[podcontract.AppRestartReload] != 1 || !strings.Contains(r.Last.Message, "it was asked to reload") {
		t.Errorf("record %+v, last %+v\n%s", r, r.Last, readable(t, log.String()))
	}
	cancel()
	<-res
}

// Reloads are asked for, not crashes: more of them than the crash-loop budget allows still
// restart Nginx in place. On real F-Stack a budget of 10 that counted them made the tenth of
// ten reloads exit the container (70), and the kubelet restarted it.
func TestReloadsDoNotSpendTheCrashLoopBudget(t *testing.T) {
	rl := runReloadable(t, 1)
	l, starts, pidPath, res, cancel, self := rl.l, rl.starts, rl.pidPath, rl.res, rl.cancel, rl.self
	defer cancel()
	for i := 1; i <= 3; i++ {
		waitFor(t, "the launcher's pid in nginx's pid file", func() bool { return strings.Join(lines(pidPath), "") == self })
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("nginx started %d times", i+1), func() bool { return len(lines(starts)) == i+1 })
	}
	select {
	case code := <-res:
		t.Fatalf("the launcher exited %d after 3 reloads with a budget of 1", code)
	default:
	}
	waitFor(t, "3 reloads counted", func() bool {
		r, _ := podcontract.ReadAppRestarts(filepath.Dir(l.StateDir), l.Container)
		return r != nil && r.ByReason[podcontract.AppRestartReload] == 3
	})
	cancel()
	<-res
}
