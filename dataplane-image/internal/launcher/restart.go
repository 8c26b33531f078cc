package launcher

import (
	"fmt"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Restarting the app in place. The launcher used to exit whenever its app could not go on (the
// dataplane's generation moved, the app died, it could not serve), and the kubelet restarted
// the container with its back-off (10 s, 20 s, 40 s ... 5 min), so the fifth fault of a day
// cost minutes. It now starts the app again itself, through the whole start path (the
// configuration read and judged again, the dataplane's ready generation, the shim proved to
// load, the shim contexts checked), and records every restart in its directory of the
// app-state volume (podcontract.AppRestartsFile), which the dataplane exports
// (fstack_app_restarts_total, /status): the container's restart count no longer shows them.
//
// It still exits for what a restart cannot fix: a configuration the shim cannot run (78), a
// command that cannot be started (127), a dataplane that never becomes ready or never has the
// contexts (1), the app finishing on its own (its exit 0), the container's stop, and a crash
// loop: more than MaxRestarts restarts for the app's own failures (exits, a broken Nginx) within
// RestartWindow, after which the kubelet's restart count and back-off show it, with the exit
// code of the last failure. Reloads and the dataplane's new generations do not count.

// loadRestarts reads the container's record, to go on counting across its restarts.
func (l *Launcher) loadRestarts() {
	r, err := podcontract.ReadOwnAppRestarts(l.StateDir)
	if err != nil {
		l.log().Warn("cannot read this container's restart record: counting from 0", logging.KeyErr, err)
		r = &podcontract.Restarts{}
	}
	l.restarts = r
}

// spendsBudget says whether a restart for reason counts towards the crash-loop budget: only the
// app's own failures do. A reload is asked for (ten config changes are no crash loop: measured
// on real F-Stack, a budget that counted them restarted the container at the tenth), and a move
// of the dataplane's generation is bounded by the supervisor's own budget.
func spendsBudget(reason string) bool {
	return reason != podcontract.AppRestartReload && reason != podcontract.AppRestartDataplane
}

// restartInPlace records a restart for out and says whether the budget allows it.
func (l *Launcher) restartInPlace(out outcome) bool {
	now := time.Now()
	kept := l.restartTimes[:0]
	for _, t := range l.restartTimes {
		if now.Sub(t) < l.RestartWindow {
			kept = append(kept, t)
		}
	}
	l.restartTimes = kept
	if l.MaxRestarts <= 0 {
		return false // restarts in place are off
	}
	spends := spendsBudget(out.reason)
	if spends && len(kept) >= l.MaxRestarts {
		l.log().Error(fmt.Sprintf("%s; not restarting it in place: %d restarts within %s already, a crash loop: exiting %d, the kubelet restarts the container with its back-off", out.msg, len(kept), l.RestartWindow, out.code), "reason", out.reason)
		return false
	}
	if spends {
		l.restartTimes = append(l.restartTimes, now)
	}
	l.recordRestart(out, now)
	l.log().Warn("restarting the app in place", "reason", out.reason, "restarts", l.restarts.Total, "cause", out.msg)
	return true
}

// recordRestart adds a restart in place to the container's record, which the dataplane exports:
// the ones restartInPlace makes, and a reload that overlapped, recorded once its old Nginx
// stopped.
func (l *Launcher) recordRestart(out outcome, now time.Time) {
	if l.restarts == nil {
		l.restarts = &podcontract.Restarts{}
	}
	l.restarts.Add(out.reason, out.msg, now)
	if err := podcontract.WriteAppRestarts(l.StateDir, l.restarts); err != nil {
		l.log().Warn("cannot record the restart for the dataplane's metrics and status", logging.KeyErr, err)
	}
}
