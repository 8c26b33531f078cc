package launcher

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A reload with an overlap, as Nginx's own reload does it. Stopping Nginx and then starting it
// with the new configuration left nothing listening in between: on real F-Stack it served again
// 0.73-0.86 s after each reload (2-7 s when the old master ignored SIGQUIT), and 4 of 90
// requests failed over ten reloads. So the new Nginx is started beside the running one, a
// second child of the launcher in its own process group, through the same start path; the old
// one is stopped (gracefully: SIGQUIT, SIGTERM, SIGKILL) only once the new one's workers are up,
// in the background, while the loop supervises the new one.
//
// Both listen on the same ports with reuseport, which the shim maps to FreeBSD's SO_REUSEPORT
// (set for real only with the image's patch 0008: upstream's shim set every option to zero, and
// the second bind failed with EADDRINUSE), whose lookup gives a SYN to one listener (of two on the wildcard address, the older): new
// connections go to the old Nginx until its workers close their listening sockets on SIGQUIT,
// and to the new one from then on. With net.inet.tcp.blackhole=1 a SYN that finds no listener
// is dropped, not reset, and the client retries after a second; the overlap leaves no such
// moment. nginxconf requires reuseport on every listen only with several F-Stack instances; a
// configuration with a listen a second Nginx cannot share (nginxconf's Exclusive), the old or the
// new, makes the reload stop the old Nginx first, as do too few free shim contexts for both.
//
// The states of one supervise (supervision), one reload at a time:
//
//	steady ──reload──▶ overlap (cur serves, next starts) ──next's workers up──▶ retiring (next is cur, old stops)
//	                     │ next exits, its watch judges it, or ReloadWait passes: retiring (next stops, cur serves)
//	                     │ cur exits on its own: next becomes cur at once
//	retiring ──the retired run's group is gone──▶ steady (a reload asked for meanwhile starts now)
//
// A signal that stops the container, or a move of the dataplane's generation, stops every run
// it holds (a DPDK secondary cannot outlive its primary).

// reloadWait bounds how long a reload's new Nginx has to bring its workers up beside the old
// one, which serves meanwhile: a start takes well under a second on real F-Stack, and a master
// stuck in its EAL initialisation never writes its pid file, so its watch never judges it.
const reloadWait = 10 * time.Second

// supervision is what one supervise holds: the run that serves and, around a reload, the new
// Nginx starting beside it or a run being stopped in the background.
type supervision struct {
	l        *Launcher
	ctx      context.Context // the launcher's: done when the container is stopped
	cur      *appRun
	next     *overlap
	retiring *retirement
	// pending is the cause of a reload asked for while another was under way: it follows.
	pending string
}

// overlap is a reload's new Nginx while it starts beside the running one.
type overlap struct {
	run   *appRun
	why   string // the reload's cause
	begin time.Time
	by    time.Time // its workers are up by then, or it is stopped
}

// retirement is a run stopped in the background: the old Nginx of a reload, or a new one that
// failed. done closes once its process group is gone; how and took are set before.
type retirement struct {
	run *appRun
	// reload is the reload that retired it, with how long its new Nginx took to serve; nil for
	// a new Nginx that failed.
	reload  *overlap
	upAfter time.Duration
	done    chan struct{}
	how     string
	took    time.Duration
}

// reload starts the Nginx with the configuration it would now read beside the running one
// (steady), or notes it for later (a reload under way). A configuration refused by nginxconf or
// nginx -t, or a start that fails, leaves the running Nginx serving; when the overlap cannot
// be (cannotOverlap, overlapContexts) the running Nginx is stopped first, as before.
func (s *supervision) reload(why string) (outcome, bool) {
	l, r := s.l, s.cur
	if s.next != nil || s.retiring != nil {
		s.pending = why
		l.log().Info("reload: another reload is under way; this one follows once it is done", "cause", why)
		return outcome{}, false
	}
	if out, done := s.generationMoved(); done {
		return out, true
	}
	next, err := l.prepareApp(s.ctx, r.a.orig)
	if err == nil {
		err = l.testNginx(s.ctx, next.argv)
	}
	if err != nil {
		l.log().Error("reload: the new configuration is refused; nginx keeps serving with the one it runs", "cause", why, logging.KeyErr, err)
		return outcome{}, false
	}
	if blocked := l.cannotOverlap(r.a, next); blocked != "" {
		return l.stopForReload(r, why, blocked)
	}
	env, err := l.environ(s.ctx, next.argv[0])
	if err != nil {
		l.log().Error("reload: cannot start the new nginx; nginx keeps serving with the configuration it runs", "cause", why, logging.KeyErr, err)
		return outcome{}, false
	}
	short := l.overlapContexts(s.ctx, r.gen, next.need)
	if s.ctx.Err() != nil {
		return outcome{}, false // the container is being stopped: the loop's next step does it
	}
	if short != "" {
		return l.stopForReload(r, why, short)
	}
	n, err := l.startApp(next, env, r.gen)
	if err != nil {
		l.log().Error("reload: cannot start the new nginx; nginx keeps serving with the configuration it runs", "cause", why, "argv0", next.argv[0], logging.KeyErr, err)
		return outcome{}, false
	}
	if err := l.record(r.gen); err != nil {
		l.log().Warn("reload: cannot record the generation the new nginx started against", logging.KeyErr, err)
	}
	now := time.Now()
	s.next = &overlap{run: n, why: why, begin: now, by: now.Add(l.reloadWait())}
	l.log().Info("reload: the new nginx started beside the running one, which serves until the new one's workers are up",
		"cause", why, logging.KeyPID, n.cmd.Process.Pid, "old", r.cmd.Process.Pid, "within", l.reloadWait().String())
	return outcome{}, false
}

func (l *Launcher) reloadWait() time.Duration {
	if l.ReloadWait > 0 {
		return l.ReloadWait
	}
	return reloadWait
}

// cannotOverlap says why a reload from the running Nginx (cur) to next must stop the running one
// first, or "".
func (l *Launcher) cannotOverlap(cur, next *app) string {
	switch {
	case l.MaxRestarts <= 0:
		return "restarts in place are off (--max-restarts=0)"
	case !next.nginx || next.workers < 1 || l.WorkerSettle <= 0:
		// Only the watch tells when the new Nginx serves: without it the old one would be
		// stopped blind.
		return "the launcher cannot tell when a new nginx is up (its worker watch is off)"
	case len(cur.exclusive) > 0:
		// With one F-Stack instance nginxconf lets a listen go without reuseport.
		return "the running nginx has listens a second nginx cannot share, without reuseport (" + strings.Join(cur.exclusive, ", ") + ")"
	case len(next.exclusive) > 0:
		return "the new configuration has listens a second nginx cannot share, without reuseport (" + strings.Join(next.exclusive, ", ") + ")"
	}
	return ""
}

// lookNext is the look at the new Nginx while it starts: the launcher takes its pid file over
// as at any start, and the worker watch, which watches the new master only, tells when it
// serves or why it cannot.
func (s *supervision) lookNext() {
	o := s.next
	n := o.run
	n.pid.takeOver()
	if n.pid.masterStarted() {
		n.watch.masterUp()
	}
	now := time.Now()
	why := n.watch.look(n.cmd.Process.Pid, now)
	switch {
	case why != "":
		s.abort(why)
	case n.watch.serving() && (n.pid == nil || n.pid.masterStarted()):
		s.promote()
	case now.After(o.by):
		s.abort(fmt.Sprintf("the new nginx did not have its %d workers up within %s (up: %d)", n.watch.want, s.l.reloadWait(), n.watch.up))
	}
}

// promote makes the new Nginx the one that serves and stops the old one in the background.
func (s *supervision) promote() {
	l, o, old := s.l, s.next, s.cur
	s.cur, s.next = o.run, nil
	up := time.Since(o.begin)
	l.log().Info("reload: the new nginx's workers are up; stopping the old one gracefully: SIGQUIT, then SIGTERM after quitGrace, then SIGKILL after termGrace more",
		logging.KeyPID, o.run.cmd.Process.Pid, "old", old.cmd.Process.Pid, "upAfter", up.Round(time.Millisecond).String(), "quitGrace", l.QuitGrace.String(), "termGrace", l.TermGrace.String())
	s.retiring = l.retire(old, false)
	s.retiring.reload, s.retiring.upAfter = o, up
}

// abort stops a new Nginx that cannot serve; the running one goes on, as Nginx itself keeps
// its old workers when the new configuration fails.
func (s *supervision) abort(why string) {
	l, n := s.l, s.next.run
	s.next = nil
	l.log().Error("reload: "+why+"; stopping the new nginx: nginx keeps serving with the configuration it runs", logging.KeyPID, n.cmd.Process.Pid, "serving", s.cur.cmd.Process.Pid)
	s.retiring = l.retire(n, n.watch.up == 0)
}

// newExited: the new Nginx exited while it started (a port it cannot bind, a failure at its
// EAL initialisation); what it forked is killed, and the running one goes on.
func (s *supervision) newExited() {
	l, n := s.l, s.next.run
	s.next = nil
	l.log().Error("reload: the new nginx exited before its workers were up ("+describeExit(n.cmd.ProcessState)+"): nginx keeps serving with the configuration it runs",
		logging.KeyPID, n.cmd.Process.Pid, "serving", s.cur.cmd.Process.Pid)
	s.retiring = l.retire(n, true)
}

// oldExited: the running Nginx exited on its own while the new one started; the new one takes
// over at once (its watch judges it from now on, as any run's).
func (s *supervision) oldExited() {
	l, o, old := s.l, s.next, s.cur
	l.log().Warn("reload: the running nginx exited before the new one was up ("+describeExit(old.cmd.ProcessState)+"): the new one takes over",
		logging.KeyPID, o.run.cmd.Process.Pid, "old", old.cmd.Process.Pid)
	s.cur, s.next = o.run, nil
	s.retiring = l.retire(old, true)
	s.retiring.reload, s.retiring.upAfter = o, time.Since(o.begin)
}

// retire stops r in the background: gracefully when it may have requests to finish, else as
// an Nginx without workers (dead); then whatever of its group outlived its master.
func (l *Launcher) retire(r *appRun, dead bool) *retirement {
	rt := &retirement{run: r, done: make(chan struct{})}
	pid, begin := r.cmd.Process.Pid, time.Now()
	go func() {
		defer close(rt.done)
		if dead {
			rt.how = l.stopDeadNginx(pid, r.exited)
		} else {
			rt.how = l.stopNginx(pid, r.exited)
		}
		l.killLeftovers(pid)
		rt.took = time.Since(begin)
	}()
	return rt
}

// retired is done once the run being stopped is gone (nil, never ready, when there is none).
func (s *supervision) retired() <-chan struct{} {
	if s.retiring == nil {
		return nil
	}
	return s.retiring.done
}

// nextExited is done once a reload's new Nginx exited (nil when none starts).
func (s *supervision) nextExited() <-chan struct{} {
	if s.next == nil {
		return nil
	}
	return s.next.run.exited.Done()
}

// retirementDone ends a retirement: the pid file names the launcher again (an exiting master
// deletes it, an old one as a failed new one), and a reload is recorded as a restart in place
// for the dataplane's /status and fstack_app_restarts_total, with what the overlap took.
func (s *supervision) retirementDone() {
	l, rt := s.l, s.retiring
	s.retiring = nil
	s.cur.pid.reassert()
	if rt.reload == nil {
		return
	}
	msg := fmt.Sprintf("nginx reloaded (%s), overlapped: the new nginx had its workers up %s after its start, beside the old one, which then stopped %s in %s",
		rt.reload.why, rt.upAfter.Round(time.Millisecond), rt.how, rt.took.Round(time.Millisecond))
	l.log().Info("reload: done: "+msg, logging.KeyPID, s.cur.cmd.Process.Pid)
	l.recordRestart(outcome{reason: podcontract.AppRestartReload, msg: msg}, time.Now())
}

// waitRetired waits for the run being stopped, its group SIGKILLed after grace when grace is
// set (the dataplane's generation moved: its primary is gone).
func (s *supervision) waitRetired(grace time.Duration) {
	rt := s.retiring
	if rt == nil {
		return
	}
	if grace > 0 {
		select {
		case <-rt.done:
		case <-time.After(grace):
			_ = syscall.Kill(-rt.run.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	<-rt.done
	s.retirementDone()
}
