package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// Reloading Nginx under the shim. A reload (SIGHUP to the master: `nginx -s reload`, a
// ConfigMap reloader) makes the master fork new workers, and under the multi-SC shim a re-forked
// worker gets no context and dies at once (docs/fstack-rules.md §6): the app served nothing
// until the kubelet's liveness probe killed the container. So a reload becomes a restart of
// Nginx in place: the new configuration is read and judged (internal/nginxconf) and tested
// (nginx -t) while the old Nginx still serves; a configuration that fails either is logged and
// the old Nginx keeps serving, as nginx itself does; otherwise the new Nginx is started beside
// the old one, which is stopped once the new one serves (overlap.go).
//
// The reload reaches the launcher through the pid file: once the master has written its pid
// there, the launcher writes its own, so `nginx -s reload` (which signals the pid in the file)
// and any reloader that reads the file signal the launcher. A reloader that signals the master
// by other means is caught by the worker watch (workers.go: new workers beside the old ones),
// which restarts Nginx in place as well.

// pidFile is the app's pid file while the launcher holds it.
type pidFile struct {
	l        *Launcher
	path     string
	master   int
	held     bool
	deadline time.Time
}

// newPidFile starts watching nginx's pid file; nil (which does nothing) for other apps or when
// the file is unknown.
func (l *Launcher) newPidFile(a *app, master int) *pidFile {
	if !a.nginx || a.pidFile == "" {
		return nil
	}
	return &pidFile{l: l, path: a.pidFile, master: master, deadline: time.Now().Add(l.WaitTimeout)}
}

// takeOver writes the launcher's pid over the master's, once the master has written its own.
func (p *pidFile) takeOver() {
	if p == nil || p.held || p.deadline.IsZero() {
		return
	}
	b, err := os.ReadFile(p.path)
	if err == nil && len(b) <= 32 && strings.TrimSpace(string(b)) == strconv.Itoa(p.master) {
		if err = fsutil.WriteAtomic(p.path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err == nil {
			p.held = true
			p.l.log().Info("nginx's pid file now names the launcher: nginx -s reload restarts nginx in place", "file", p.path)
			return
		}
	}
	if time.Now().After(p.deadline) {
		p.deadline = time.Time{}
		p.l.log().Warn("nginx's pid file does not name its master: nginx -s reload would signal no one here; a SIGHUP to the master is still caught by the worker watch", "file", p.path, logging.KeyErr, err)
	}
}

// masterStarted says whether the master is past its start: its pid file was taken over, or
// the launcher gave up waiting for it (a master that never writes one has had WaitTimeout).
func (p *pidFile) masterStarted() bool {
	return p != nil && (p.held || p.deadline.IsZero())
}

// reassert writes the launcher's pid again once the file no longer names it: an Nginx master
// deletes its pid file when it exits, the old master of a reload too (after the new one's pid
// was taken over), and a new master that fails may leave its own pid there.
func (p *pidFile) reassert() {
	if p == nil || !p.held {
		return
	}
	self := strconv.Itoa(os.Getpid())
	if b, err := os.ReadFile(p.path); err == nil && strings.TrimSpace(string(b)) == self {
		return
	}
	if err := fsutil.WriteAtomic(p.path, []byte(self+"\n"), 0o644); err != nil {
		p.l.log().Warn("cannot write the launcher's pid into nginx's pid file again: nginx -s reload would reach no one", "file", p.path, logging.KeyErr, err)
		return
	}
	p.l.log().Info("nginx's pid file names the launcher again (an nginx master that exited removed it)", "file", p.path)
}

// release removes the pid file when it still names the launcher, which is going away.
func (p *pidFile) release() {
	if p == nil || !p.held {
		return
	}
	if b, err := os.ReadFile(p.path); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
		_ = os.Remove(p.path)
	}
}

// stopForReload is the reload that cannot overlap (blocked says why): the running Nginx is
// stopped gracefully and the outcome restarts it in place with the new configuration, through
// the whole start path (which asks the dataplane for a restart when too few contexts are free
// even then).
func (l *Launcher) stopForReload(r *appRun, why, blocked string) (outcome, bool) {
	begin := time.Now()
	l.log().Warn("reload: "+blocked+": stopping the running nginx first, then starting it with the new configuration (nothing listens in between)", "cause", why, logging.KeyPID, r.cmd.Process.Pid)
	l.stopNginx(r.cmd.Process.Pid, r.exited)
	return outcome{code: ExitAppBroken, reason: podcontract.AppRestartReload,
		msg: fmt.Sprintf("nginx reloaded (%s), not overlapped (%s); stopped in %s", why, blocked, time.Since(begin).Round(time.Millisecond))}, true
}

// overlapReadingWait bounds the wait for a fresh count of the shim contexts before a reload's
// new Nginx starts: the dataplane counts them every 100 ms.
const overlapReadingWait = 2 * time.Second

// overlapContexts says why a reload's new Nginx (need) cannot start beside the running one,
// which holds its own contexts until it stops, or "". Short for the overlap only, the reload
// stops the running one first instead: a dataplane restart would stop both.
func (l *Launcher) overlapContexts(ctx context.Context, gen string, need []int) string {
	ctx, cancel := context.WithTimeout(ctx, overlapReadingWait)
	defer cancel()
	st, err := l.freshState(ctx, gen, shimctx.Now())
	switch {
	case err != nil:
		return "no fresh count of the shim contexts (" + err.Error() + ")"
	case st == nil:
		return "" // a dataplane that publishes none: as at any start, unchecked
	case st.Error != "":
		l.log().Warn("reload: the dataplane cannot count the shim contexts: starting the new nginx without checking them", logging.KeyErr, st.Error)
		return ""
	}
	if short := st.Short(need); len(short) > 0 {
		return fmt.Sprintf("too few free shim contexts for a new nginx beside the running one (%s)", strings.Join(short, ", "))
	}
	l.log().Info("reload: shim contexts for the new nginx beside the running one", "free", freeList(st), "need", fmt.Sprint(need), logging.KeyGeneration, gen)
	return ""
}

// testNginx runs nginx -t with the command's options, without the shim.
func (l *Launcher) testNginx(ctx context.Context, argv []string) error {
	if l.NginxTest != nil {
		return l.NginxTest(ctx, argv)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append([]string{"-t", "-q"}, argv[1:]...)...)
	cmd.Env = withoutPreload(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s -t: %w: %s", argv[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}
