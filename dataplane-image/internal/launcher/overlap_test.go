package launcher

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The overlap of a reload (overlap.go), played by reloadNginx's stand-in masters: real
// processes with real worker children, which the launcher's worker watch reads from /proc, and
// the launcher's real signals. Not real: Nginx and its listeners (the e2e step
// checkReloadsRestartNginxInPlace polls a real Nginx through its reloads), the shim.

// eventAt is the index of the first line of the stand-ins' events that is fields, -1 if none.
func eventAt(rl *reloadable, fields ...string) int {
	for i, line := range eventLines(rl) {
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return i
		}
	}
	return -1
}

func eventLines(rl *reloadable) []string {
	b, _ := os.ReadFile(rl.events)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// masterOf waits for the stand-in master started with version v and returns its pid.
func masterOf(t *testing.T, rl *reloadable, v string) string {
	t.Helper()
	var pid string
	waitFor(t, "the master of "+v, func() bool {
		for _, line := range eventLines(rl) {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "start" && f[2] == v {
				pid = f[1]
				return true
			}
		}
		return false
	})
	return pid
}

// reloadTo writes version v of the configuration and sends what `nginx -s reload` sends: SIGHUP
// to the pid in nginx's pid file, once the file names the launcher.
func (rl *reloadable) reloadTo(t *testing.T, v string) {
	t.Helper()
	rl.reloadToConf(t, v, goodConf)
}

// reloadToConf is reloadTo with conf as the configuration's body.
func (rl *reloadable) reloadToConf(t *testing.T, v, conf string) {
	t.Helper()
	waitFor(t, "the launcher's pid in nginx's pid file", func() bool { return strings.Join(lines(rl.pidPath), "") == rl.self })
	write(t, rl.dir, "nginx.conf", "# "+v+"\npid "+rl.pidPath+";\n"+conf)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

func (rl *reloadable) restarts() *podcontract.Restarts {
	r, _ := podcontract.ReadAppRestarts(filepath.Dir(rl.l.StateDir), rl.l.Container)
	if r == nil {
		return &podcontract.Restarts{}
	}
	return r
}

func alivePid(pid string) bool {
	n, err := strconv.Atoi(pid)
	return err == nil && alive(n)
}

// A reload starts the new Nginx while the old one still serves, and stops the old one (SIGQUIT)
// only once the new one's workers are up; the old one's exit, which removes the pid file, ends
// nothing: the new one runs on, supervised, and the pid file names the launcher again, so the
// next reload reaches it. On main the old Nginx got SIGQUIT before the new one started, and
// nothing listened in between.
func TestReloadStartsTheNewNginxBeforeTheOldStops(t *testing.T) {
	rl := runReloadable(t, 5)
	v1 := masterOf(t, rl, "v1")
	rl.reloadTo(t, "v2")
	v2 := masterOf(t, rl, "v2")
	waitFor(t, "the old nginx stopped", func() bool { return eventAt(rl, "quit", v1) >= 0 && !alivePid(v1) })
	if start, quit := eventAt(rl, "start", v2, "v2"), eventAt(rl, "quit", v1); start > quit {
		t.Fatalf("the old master got SIGQUIT before the new one started: events %q", eventLines(rl))
	}
	log := readable(t, rl.log.String())
	for _, want := range []string{"reload: the new nginx started beside the running one", "reload: the new nginx's workers are up; stopping the old one gracefully"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	waitFor(t, "the pid file naming the launcher after the old master removed it", func() bool {
		return strings.Join(lines(rl.pidPath), "") == rl.self
	})
	waitFor(t, "the reload recorded", func() bool { return rl.restarts().ByReason[podcontract.AppRestartReload] == 1 })
	if r := rl.restarts(); r.Total != 1 || !strings.Contains(r.Last.Message, "overlapped") || !strings.Contains(r.Last.Message, "stopped on SIGQUIT") {
		t.Errorf("record %+v, last %+v: want one reload, its message saying it overlapped and how the old one stopped", r, r.Last)
	}
	if !alivePid(v2) {
		t.Fatalf("the new master %s is gone after the old one's exit; log:\n%s", v2, rl.log)
	}
	// The run goes on with the new Nginx: the next reload reaches the launcher through the file
	// and replaces it in turn.
	rl.reloadTo(t, "v3")
	v3 := masterOf(t, rl, "v3")
	waitFor(t, "v2 stopped after v3 started", func() bool { return eventAt(rl, "quit", v2) > eventAt(rl, "start", v3, "v3") })
	if got := strings.Join(lines(rl.starts), " "); got != "v1 v2 v3" {
		t.Errorf("starts %q, want v1 v2 v3", got)
	}
	select {
	case code := <-rl.res:
		t.Fatalf("the launcher exited %d", code)
	default:
	}
}

// A new Nginx that never brings its workers up (stuck at its start) is stopped after
// ReloadWait, and the old one goes on serving, as Nginx keeps its old workers when the new
// configuration fails; a later reload works. On main the old Nginx was stopped first.
func TestReloadWhoseNewNginxNeverServesKeepsTheOld(t *testing.T) {
	rl := runReloadable(t, 5, func(l *Launcher) { l.ReloadWait = time.Second })
	v1 := masterOf(t, rl, "v1")
	rl.reloadTo(t, "hang")
	hung := masterOf(t, rl, "hang")
	waitFor(t, "the new nginx given up", func() bool {
		return strings.Contains(readable(t, rl.log.String()), "reload: the new nginx did not have its 2 workers up within 1s (up: 0); stopping the new nginx: nginx keeps serving")
	})
	waitFor(t, "the stuck master stopped", func() bool { return !alivePid(hung) })
	if !alivePid(v1) || eventAt(rl, "quit", v1) >= 0 || eventAt(rl, "term", v1) >= 0 {
		t.Fatalf("the old nginx %s was stopped (events %q); log:\n%s", v1, eventLines(rl), rl.log)
	}
	if r := rl.restarts(); r.Total != 0 {
		t.Errorf("record %+v: a reload that did not happen was counted", r)
	}
	rl.reloadTo(t, "v2")
	waitFor(t, "the reload to v2", func() bool { return eventAt(rl, "quit", v1) >= 0 && strings.Join(lines(rl.starts), " ") == "v1 v2" })
}

// A new Nginx that exits at its start (after writing its pid file, as one that cannot bind its
// port) leaves the old one serving, and the pid file names the launcher again. On main the old
// Nginx was stopped first, and the failed start ended in a restart.
func TestReloadWhoseNewNginxExitsKeepsTheOld(t *testing.T) {
	rl := runReloadable(t, 5)
	v1 := masterOf(t, rl, "v1")
	rl.reloadTo(t, "exit")
	waitFor(t, "the new nginx's exit logged", func() bool {
		return strings.Contains(readable(t, rl.log.String()), "reload: the new nginx exited before its workers were up (exit status 1): nginx keeps serving")
	})
	waitFor(t, "the pid file naming the launcher again", func() bool { return strings.Join(lines(rl.pidPath), "") == rl.self })
	if !alivePid(v1) || eventAt(rl, "quit", v1) >= 0 {
		t.Fatalf("the old nginx %s was stopped (events %q); log:\n%s", v1, eventLines(rl), rl.log)
	}
	if got := strings.Join(lines(rl.starts), " "); got != "v1" {
		t.Errorf("starts %q, want nginx v1 left running", got)
	}
}

// SIGTERM to the container while both Nginx run stops both: the old one gracefully, the new
// one too, side by side, and the launcher exits. On main the two never ran at once.
func TestSIGTERMDuringTheOverlapStopsBoth(t *testing.T) {
	rl := runReloadable(t, 5, func(l *Launcher) { l.ReloadWait = time.Minute })
	v1 := masterOf(t, rl, "v1")
	rl.reloadTo(t, "hang")
	hung := masterOf(t, rl, "hang")
	waitFor(t, "both masters running", func() bool { return alivePid(v1) && alivePid(hung) })
	// The launcher catches every signal while it supervises: this one does not end the test.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-rl.res:
		if code != 0 {
			t.Errorf("exit %d, want the old nginx's 0 (it left on SIGQUIT)", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the launcher did not exit on SIGTERM during the overlap")
	}
	if alivePid(v1) || alivePid(hung) || eventAt(rl, "quit", v1) < 0 {
		t.Fatalf("after SIGTERM: old %s alive %t, new %s alive %t; events %q", v1, alivePid(v1), hung, alivePid(hung), eventLines(rl))
	}
}

// A move of the dataplane's generation while both Nginx run stops both (each a DPDK secondary
// of the primary that is gone), and the restart is recorded as the dataplane's. On main the two
// never ran at once.
func TestGenerationMoveDuringTheOverlapStopsBoth(t *testing.T) {
	rl := runReloadable(t, 5, func(l *Launcher) { l.ReloadWait = time.Minute })
	v1 := masterOf(t, rl, "v1")
	rl.reloadTo(t, "hang")
	hung := masterOf(t, rl, "hang")
	waitFor(t, "both masters running", func() bool { return alivePid(v1) && alivePid(hung) })
	write(t, rl.dir, podcontract.GenerationFile, "2\n")
	waitFor(t, "both masters stopped", func() bool { return !alivePid(v1) && !alivePid(hung) })
	waitFor(t, "the restart recorded", func() bool { return rl.restarts().ByReason[podcontract.AppRestartDataplane] == 1 })
	if r := rl.restarts(); r.ByReason[podcontract.AppRestartReload] != 0 {
		t.Errorf("record %+v: the reload that never served was counted", r)
	}
}

// The old Nginx exiting on its own while the new one starts hands over to the new one at once:
// it is not taken for the app's exit (no restart for it, no third start). On main the two
// never ran at once.
func TestOldNginxExitingDuringTheOverlapHandsOver(t *testing.T) {
	// The new master's workers count as up only after a second: time to kill the old one first.
	rl := runReloadable(t, 5, func(l *Launcher) { l.MinWorkerAge, l.WorkerSettle = time.Second, 3*time.Second })
	v1 := masterOf(t, rl, "v1")
	rl.reloadTo(t, "v2")
	v2 := masterOf(t, rl, "v2")
	pid, _ := strconv.Atoi(v1)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload recorded", func() bool { return rl.restarts().ByReason[podcontract.AppRestartReload] == 1 })
	if !strings.Contains(readable(t, rl.log.String()), "reload: the running nginx exited before the new one was up (killed by signal killed): the new one takes over") {
		t.Errorf("log:\n%s", rl.log)
	}
	time.Sleep(2 * time.Second) // the new one's watch has judged it since
	if r := rl.restarts(); r.Total != 1 || !alivePid(v2) || strings.Join(lines(rl.starts), " ") != "v1 v2" {
		t.Errorf("record %+v, new master alive %t, starts %q: want the new nginx serving on, one reload counted", r, alivePid(v2), lines(rl.starts))
	}
}

// A second reload asked for while one is under way follows it: each new configuration is run in
// turn, each old Nginx stopped after its successor started.
func TestAReloadAskedDuringAnotherFollowsIt(t *testing.T) {
	rl := runReloadable(t, 5)
	masterOf(t, rl, "v1")
	rl.reloadTo(t, "v2")
	masterOf(t, rl, "v2")
	// Still under way: the new one's workers are not up for MinWorkerAge yet, or the old one
	// is stopping.
	write(t, rl.dir, "nginx.conf", "# v3\npid "+rl.pidPath+";\n"+goodConf)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both reloads recorded", func() bool { return rl.restarts().ByReason[podcontract.AppRestartReload] == 2 })
	if got := strings.Join(lines(rl.starts), " "); got != "v1 v2 v3" {
		t.Errorf("starts %q, want v1 v2 v3", got)
	}
	if !strings.Contains(readable(t, rl.log.String()), "reload: another reload is under way; this one follows once it is done") {
		t.Errorf("log:\n%s", rl.log)
	}
}

// When the shim has too few free contexts for a second Nginx beside the running one (which
// holds its own until it stops), the reload stops the running one first, as before the overlap,
// without asking the dataplane for a restart that would stop both.
func TestReloadShortOfContextsForTheOverlapStopsTheOldFirst(t *testing.T) {
	var sup *fakeSupervisor
	rl := runReloadable(t, 5, func(l *Launcher) { sup = startFakeSupervisor(t, l, 2, true) })
	v1 := masterOf(t, rl, "v1")
	// The first Nginx holds instance 0's contexts: one is left, the new one needs two.
	sup.free.Store(1)
	go func() {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if eventAt(rl, "quit", v1) >= 0 {
				sup.free.Store(32) // the old one gave its contexts back
				return
			}
		}
	}()
	rl.reloadTo(t, "v2")
	v2 := masterOf(t, rl, "v2")
	if eventAt(rl, "quit", v1) > eventAt(rl, "start", v2, "v2") {
		t.Errorf("the new nginx started beside the old one short of contexts: events %q", eventLines(rl))
	}
	if !strings.Contains(readable(t, rl.log.String()), "reload: too few free shim contexts for a new nginx beside the running one (instance 0: 1 free, 2 needed): stopping the running nginx first") {
		t.Errorf("log:\n%s", rl.log)
	}
	if n := sup.restarts.Load(); n != 0 {
		t.Errorf("the dataplane was restarted %d times for the overlap", n)
	}
	waitFor(t, "the reload recorded", func() bool { return rl.restarts().ByReason[podcontract.AppRestartReload] == 1 })
	if r := rl.restarts(); !strings.Contains(r.Last.Message, "not overlapped") {
		t.Errorf("last %+v", r.Last)
	}
}

// With one F-Stack instance a listen may go without reuseport, and a second Nginx could not
// bind it beside the running one (EADDRINUSE, on F-Stack as on the kernel): such a reload stops
// the running Nginx first, as before the overlap, instead of starting a new one that fails.
func TestReloadToAListenWithoutReuseportStopsTheOldFirst(t *testing.T) {
	rl := runReloadable(t, 5, func(l *Launcher) {
		l.Getenv = func(k string) string { return map[string]string{podcontract.EnvInstances: "1"}[k] }
	})
	v1 := masterOf(t, rl, "v1")
	rl.reloadToConf(t, "v2", strings.Replace(goodConf, "listen 80 reuseport;", "listen 80;", 1))
	v2 := masterOf(t, rl, "v2")
	waitFor(t, "the reload recorded", func() bool { return rl.restarts().ByReason[podcontract.AppRestartReload] == 1 })
	if eventAt(rl, "quit", v1) > eventAt(rl, "start", v2, "v2") {
		t.Errorf("the new nginx started beside the old one: events %q", eventLines(rl))
	}
	if want := `reload: the new configuration has listens a second nginx cannot share, without reuseport (` + filepath.Join(rl.dir, "nginx.conf") + `:4: "listen 80"): stopping the running nginx first`; !strings.Contains(readable(t, rl.log.String()), want) {
		t.Errorf("log lacks %q:\n%s", want, rl.log)
	}
}
