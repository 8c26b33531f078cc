package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
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

// appRun is one run of the app, from its start to the outcome supervise returns.
type appRun struct {
	l   *Launcher
	ctx context.Context // the launcher's: done when the container is stopped
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
// moves on, it cannot serve, or (Nginx) it is asked to reload: it starts the app, then answers
// each event with the step below that names it, until one has the run's outcome.
func (l *Launcher) supervise(ctx context.Context, a *app, env []string, gen string) outcome {
	r, err := l.startApp(ctx, a, env, gen)
	if err != nil {
		l.log().Error("cannot start the app", "argv0", a.argv[0], logging.KeyErr, err)
		return final(127)
	}
	defer r.pid.release()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs)
	defer signal.Stop(sigs)
	tick := time.NewTicker(l.Poll)
	defer tick.Stop()
	for {
		out, done := outcome{}, true
		select {
		case <-r.exited.Done():
			out = r.appExited()
		case s := <-sigs:
			out, done = r.passSignal(s)
		case <-ctx.Done():
			out = r.containerStopped()
		case <-tick.C:
			out, done = r.look()
		}
		if done {
			return out
		}
	}
}

// startApp starts the app as the launcher's child, with the watches of its run.
func (l *Launcher) startApp(ctx context.Context, a *app, env []string, gen string) (*appRun, error) {
	argv := a.argv
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	// Its own process group, so a kill after the grace period also reaches what it forked.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	l.appStarting()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &appRun{l: l, ctx: ctx, a: a, gen: gen, cmd: cmd}
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

// passSignal passes a signal the launcher received on to the app, except that Nginx is stopped
// its graceful way on SIGTERM and SIGINT and restarted in place on SIGHUP (reload.go); true
// when that ends the run.
func (r *appRun) passSignal(s os.Signal) (outcome, bool) {
	l, a, pid := r.l, r.a, r.cmd.Process.Pid
	if a.nginx && (s == syscall.SIGTERM || s == syscall.SIGINT) {
		l.log().Info("stopping nginx: SIGQUIT, then SIGTERM after quitGrace, then SIGKILL after termGrace more", "signal", s.String(), logging.KeyPID, pid, "quitGrace", l.QuitGrace.String(), "termGrace", l.TermGrace.String())
		l.stopNginx(pid, r.exited)
		return final(exitCode(r.cmd.ProcessState)), true
	}
	if a.nginx && s == syscall.SIGHUP {
		return l.reload(r.ctx, a, pid, r.exited, "SIGHUP to the launcher (nginx -s reload reads the launcher's pid from "+a.pidFile+")")
	}
	if s == syscall.SIGTERM || s == syscall.SIGINT || s == syscall.SIGQUIT {
		r.stopping = true
	}
	if s != syscall.SIGCHLD && s != syscall.SIGURG {
		_ = r.cmd.Process.Signal(s)
	}
	return outcome{}, false
}

// containerStopped stops the app because the container is stopped.
func (r *appRun) containerStopped() outcome {
	if r.a.nginx {
		r.l.stopNginx(r.cmd.Process.Pid, r.exited)
	} else {
		r.l.stop(r.cmd, r.exited)
	}
	return final(exitCode(r.cmd.ProcessState))
}

// look is the run's periodic look: has the dataplane's generation moved, can the app still
// serve; true when either ends the run.
func (r *appRun) look() (outcome, bool) {
	if out, done := r.generationMoved(); done {
		return out, true
	}
	return r.cannotServe()
}

// generationMoved stops the app when the dataplane started a new generation: a DPDK secondary
// cannot survive its primary's restart.
func (r *appRun) generationMoved() (outcome, bool) {
	l := r.l
	now := l.read(podcontract.GenerationFile)
	if now == r.gen {
		return outcome{}, false
	}
	l.log().Info("the dataplane restarted: stopping the app so it starts again against the new dataplane", logging.KeyGeneration, r.gen, "now", now, logging.KeyPID, r.cmd.Process.Pid)
	l.stopWithin(r.cmd, r.exited, l.MovedGrace)
	return outcome{code: ExitDataplaneRestarted, reason: podcontract.AppRestartDataplane, msg: fmt.Sprintf("the dataplane's generation moved from %s to %s", r.gen, now)}, true
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
