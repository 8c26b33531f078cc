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
)

// Reloading Nginx under the shim. A reload (SIGHUP to the master: `nginx -s reload`, a
// ConfigMap reloader) makes the master fork new workers, and under the multi-SC shim a re-forked
// worker gets no context and dies at once (docs/fstack-rules.md §6): the app served nothing
// until the kubelet's liveness probe killed the container. So a reload becomes a restart of
// Nginx in place: the new configuration is read and judged (internal/nginxconf) and tested
// (nginx -t) while the old Nginx still serves; a configuration that fails either is logged and
// the old Nginx keeps serving, as nginx itself does; otherwise Nginx is stopped gracefully and
// started again against the same generation.
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

// release removes the pid file when it still names the launcher, which is going away.
func (p *pidFile) release() {
	if p == nil || !p.held {
		return
	}
	if b, err := os.ReadFile(p.path); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
		_ = os.Remove(p.path)
	}
}

// reload judges and tests the configuration Nginx would now read; when it passes, it stops the
// running Nginx gracefully and returns the outcome that restarts it (true). When it does not,
// the running Nginx goes on serving (false).
func (l *Launcher) reload(ctx context.Context, a *app, pid int, exited context.Context, why string) (outcome, bool) {
	begin := time.Now()
	next, err := l.prepareApp(ctx, a.orig)
	if err == nil {
		err = l.testNginx(ctx, next.argv)
	}
	if err != nil {
		l.log().Error("reload: the new configuration is refused; nginx keeps serving with the one it runs", "cause", why, logging.KeyErr, err)
		return outcome{}, false
	}
	l.log().Info("reload: nginx under the shim cannot re-fork its workers; restarting it in place with the new configuration", "cause", why, logging.KeyPID, pid)
	l.stopNginx(pid, exited)
	return outcome{code: ExitAppBroken, reason: podcontract.AppRestartReload,
		msg: fmt.Sprintf("nginx reloaded (%s); stopped in %s", why, time.Since(begin).Round(time.Millisecond))}, true
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
