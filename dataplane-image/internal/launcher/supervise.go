package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// outcome is how a run of the app ended: the container's exit code should the launcher exit,
// and, unless final, why it may be restarted in place (podcontract.AppRestart*).
type outcome struct {
	code   int
	final  bool
	reason string
	msg    string
}

func final(code int) outcome { return outcome{code: code, final: true} }

// appRun is one run of the app, from its start to its exit: supervise holds one, and two
// while a reload's new Nginx starts beside the old one (overlap.go).
type appRun struct {
	l   *Launcher
	a   *app
	gen string // the dataplane's generation the app was started against
	cmd *exec.Cmd
	// exited ends once the app's process is reaped (errAppExited).
	exited context.Context
	watch  *workerWatch
	pid    *pidFile
	// stopping: the container is being stopped (a signal that ends the app was passed on), so
	// the app's exit ends the launcher too.
	stopping bool
}

// supervise runs the app until it exits, the container is stopped, the dataplane's generation
// moves on, or it cannot serve: it starts the app, then answers each event with the step below
// that names it, until one has the outcome. A reload of Nginx starts the new Nginx beside the
// running one and stops the old one once the new one serves (overlap.go), so for a while the
// supervision holds two runs.
func (l *Launcher) supervise(ctx context.Context, a *app, env []string, gen string) outcome {
	r, err := l.startApp(a, env, gen)
	if err != nil {
		l.log().Error("cannot start the app", "argv0", a.argv[0], logging.KeyErr, err)
		return final(127)
	}
	s := &supervision{l: l, ctx: ctx, cur: r}
	defer s.end()
	sigs := l.sigs
	tick := time.NewTicker(l.Poll)
	defer tick.Stop()
	for {
		out, done := outcome{}, true
		select {
		case <-s.cur.exited.Done():
			out, done = s.curExited()
		case <-s.nextExited():
			s.newExited()
			done = false
		case <-s.retired():
			s.retirementDone()
			done = false
		case sig := <-sigs:
			out, done = s.passSignal(sig)
		case <-ctx.Done():
			out = s.containerStopped()
		case <-tick.C:
			out, done = s.look()
		}
		if done {
			return out
		}
	}
}

// startApp starts the app as the launcher's child, with the watches of its run.
func (l *Launcher) startApp(a *app, env []string, gen string) (*appRun, error) {
	argv := a.argv
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	// Its own process group, so a kill after the grace period also reaches what it forked.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	l.appStarting()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &appRun{l: l, a: a, gen: gen, cmd: cmd}
	r.watch = l.appWatch(a)
	r.pid = l.newPidFile(a, cmd.Process.Pid)
	// The app's exit, once it is reaped, is the cause that ends exited.
	exited, exit := context.WithCancelCause(context.Background())
	r.exited = exited
	go func() { _ = cmd.Wait(); exit(errAppExited) }()
	return r, nil
}

// errAppExited ends the context that stands for the app's process once it has exited.
var errAppExited = errors.New("the app exited")

// appExited is the outcome of the app's exit: final when the container is stopping or the app
// finished (exit 0), else a restart in place.
func (r *appRun) appExited() outcome {
	code := exitCode(r.cmd.ProcessState)
	if r.stopping || code == 0 {
		return final(code)
	}
	return outcome{code: code, reason: podcontract.AppRestartExited, msg: fmt.Sprintf("the app exited: %s", describeExit(r.cmd.ProcessState))}
}

// curExited is the outcome of the serving app's exit; while a reload's new Nginx starts, the
// new one takes over instead.
func (s *supervision) curExited() (outcome, bool) {
	if s.next != nil && !s.cur.stopping {
		s.oldExited()
		return outcome{}, false
	}
	return s.cur.appExited(), true
}

// passSignal passes a signal the launcher received on to the app, except that Nginx is stopped
// its graceful way on SIGTERM and SIGINT and reloaded on SIGHUP (overlap.go); true when that
// ends the run. While two Nginx run, both get it, and both are stopped.
func (s *supervision) passSignal(sig os.Signal) (outcome, bool) {
	l, r := s.l, s.cur
	if r.a.nginx && (sig == syscall.SIGTERM || sig == syscall.SIGINT) {
		l.log().Info("stopping nginx: SIGQUIT, then SIGTERM after quitGrace, then SIGKILL after termGrace more", "signal", sig.String(), logging.KeyPID, r.cmd.Process.Pid, "quitGrace", l.QuitGrace.String(), "termGrace", l.TermGrace.String())
		s.stopAll(func(r *appRun) { l.stopNginx(r.cmd.Process.Pid, r.exited) }, 0)
		return final(exitCode(r.cmd.ProcessState)), true
	}
	if r.a.nginx && sig == syscall.SIGHUP {
		return s.reload("SIGHUP to the launcher (nginx -s reload reads the launcher's pid from " + r.a.pidFile + ")")
	}
	for _, r := range s.live() {
		if sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGQUIT {
			r.stopping = true
		}
		if sig != syscall.SIGCHLD && sig != syscall.SIGURG {
			_ = r.cmd.Process.Signal(sig)
		}
	}
	return outcome{}, false
}

// containerStopped stops the app because the container is stopped.
func (s *supervision) containerStopped() outcome {
	l := s.l
	s.stopAll(func(r *appRun) {
		if r.a.nginx {
			l.stopNginx(r.cmd.Process.Pid, r.exited)
		} else {
			l.stop(r.cmd, r.exited)
		}
	}, 0)
	return final(exitCode(s.cur.cmd.ProcessState))
}

// look is the periodic look: has the dataplane's generation moved; does a reload's new Nginx
// serve yet; can the app still serve; true when one of them ends the run. A reload asked for
// while another was under way starts once that one is done.
func (s *supervision) look() (outcome, bool) {
	if out, done := s.generationMoved(); done {
		return out, true
	}
	if s.retiring != nil && s.retiring.run.exited.Err() != nil {
		// The old master deleted the pid file as it exited: the next reload must reach the
		// launcher at once, not after its workers are gone too.
		s.cur.pid.reassert()
	}
	if s.next != nil {
		s.lookNext()
		return outcome{}, false
	}
	if out, done := s.cur.cannotServe(); done {
		return out, true
	}
	if s.pending != "" && s.retiring == nil {
		why := s.pending
		s.pending = ""
		return s.reload(why)
	}
	return outcome{}, false
}

// generationMoved stops the app when the dataplane started a new generation: a DPDK secondary
// cannot survive its primary's restart. Every run goes, the old Nginx of a reload too.
func (s *supervision) generationMoved() (outcome, bool) {
	l, r := s.l, s.cur
	now := l.read(podcontract.GenerationFile)
	if now == r.gen {
		return outcome{}, false
	}
	l.log().Info("the dataplane restarted: stopping the app so it starts again against the new dataplane", logging.KeyGeneration, r.gen, "now", now, logging.KeyPID, r.cmd.Process.Pid)
	s.stopAll(func(r *appRun) { l.stopWithin(r.cmd, r.exited, l.MovedGrace) }, l.MovedGrace)
	return outcome{code: ExitDataplaneRestarted, reason: podcontract.AppRestartDataplane, msg: fmt.Sprintf("the dataplane's generation moved from %s to %s", r.gen, now)}, true
}

// live are the runs that may still be running: the serving one and a reload's new one.
func (s *supervision) live() []*appRun {
	if s.next != nil {
		return []*appRun{s.cur, s.next.run}
	}
	return []*appRun{s.cur}
}

// stopAll stops the live runs with stop, side by side (the container's grace covers one stop,
// not two in a row), and waits for a run being stopped in the background, its group killed
// after hurry when hurry is set.
func (s *supervision) stopAll(stop func(*appRun), hurry time.Duration) {
	var wg sync.WaitGroup
	for _, r := range s.live() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop(r)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.waitRetired(hurry)
	}()
	wg.Wait()
	s.next = nil
}

// end leaves nothing of the supervision behind: a reload's new Nginx still starting when the
// serving one ended is stopped, a run being stopped is waited for, and the pid file, when it
// names the launcher, is removed.
func (s *supervision) end() {
	if s.next != nil {
		n := s.next.run
		s.next = nil
		s.l.stopNginx(n.cmd.Process.Pid, n.exited)
		s.l.killLeftovers(n.cmd.Process.Pid)
	}
	s.waitRetired(0)
	s.cur.pid.release()
}

// cannotServe takes nginx's pid file over once its master wrote it (reload.go) and stops an
// Nginx whose workers cannot serve (workers.go): restarted in place as a reload when its master
// re-forked them, as broken otherwise.
func (r *appRun) cannotServe() (outcome, bool) {
	l, pid := r.l, r.cmd.Process.Pid
	r.pid.takeOver()
	if r.pid.masterStarted() {
		r.watch.masterUp()
	}
	why := r.watch.look(pid, time.Now())
	if why == "" {
		return outcome{}, false
	}
	reason := podcontract.AppRestartBroken
	if r.watch.reloaded {
		l.log().Warn(why + ": under the shim re-forked workers cannot serve; restarting nginx in place instead")
		reason = podcontract.AppRestartReload
	} else {
		l.appBroken(why)
	}
	if r.watch.up == 0 {
		l.stopDeadNginx(pid, r.exited)
	} else {
		l.stopNginx(pid, r.exited)
	}
	return outcome{code: ExitAppBroken, reason: reason, msg: why}, true
}

// describeExit says how the app ended, for the restart's record.
func describeExit(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", ps.ExitCode())
}

func (l *Launcher) stop(cmd *exec.Cmd, exited context.Context) { l.stopWithin(cmd, exited, l.Grace) }

func (l *Launcher) stopWithin(cmd *exec.Cmd, exited context.Context, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited.Done():
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited.Done()
	}
	l.killLeftovers(cmd.Process.Pid)
}

// killLeftovers kills what is left of the app's process group once its first process has
// exited: children that outlived it (an Nginx worker whose master died at its EAL
// initialisation against a primary just killed) are DPDK secondaries of the old generation, and
// the new primary cannot start while they hold its runtime files, so the new app would wait for
// a dataplane that waits for them until the kubelet's liveness probe restarts the container.
func (l *Launcher) killLeftovers(pgid int) {
	left := groupMembers(pgid)
	if len(left) == 0 {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(leftoverWait)
	for len(groupMembers(pgid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(l.Poll)
	}
	l.log().Warn("the app's processes that outlived it were killed: each held a shim context, which F-Stack gives back within a second (patch 0007)", "killed", len(left), "pids", fmt.Sprint(left))
}

// leftoverWait bounds the wait for SIGKILLed leftovers to die (a process in uninterruptible
// sleep dies only when it wakes).
const leftoverWait = 5 * time.Second

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
