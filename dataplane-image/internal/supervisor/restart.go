package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Restarting in place. A dead F-Stack process ends its generation: a DPDK secondary cannot
// outlive its primary, and a new primary cannot start while the old generation's secondaries
// (the apps) hold its runtime files (awaitOldSecondaries). Exiting and letting the kubelet
// restart the container did that too, but at the kubelet's back-off (10 s, 20 s, 40 s ... 5 min),
// so the fifth fault of a day cost minutes where the first cost seconds. RunInPlace starts the
// next generation inside the container at once, and the launchers restart their apps against it.
//
// What still ends the supervisor (the kubelet restarts the container, with its back-off):
//   - a spec, fact, render or setup error before any process starts (the spec file, the pod's
//     CPUs, hugepages, device info, config.ini, the shim's files, a missing fstack binary for
//     the shim mode, a binary that cannot be executed): a new generation would meet it again;
//   - a generation that fails to start before any generation of this container was ready: the
//     same holds, and the kubelet's restart is the visible failure;
//   - the restart budget spent (Config.Restarts: more than Max in-place restarts within Window),
//     a crash loop, which the kubelet's back-off then spaces and its restart count shows;
//   - a stop (SIGTERM), which returns nil.

// inPlaceError ends a generation that a new one started in place can replace.
type inPlaceError struct {
	reason string // podcontract.DataplaneRestart*
	msg    string
}

func (e *inPlaceError) Error() string { return e.msg }

// restartReason is the reason a generation that ended with err may be restarted in place for,
// or "" when it may not.
func (s *Supervisor) restartReason(err error) string {
	var ip *inPlaceError
	switch {
	case errors.As(err, &ip):
		return ip.reason
	case errors.Is(err, ErrRestartRequested):
		return podcontract.DataplaneRestartContexts
	case errors.Is(err, ErrPortDown):
		return podcontract.DataplaneRestartPortDown
	case errors.Is(err, errStartFailed) && s.served:
		return podcontract.DataplaneRestartStartFailed
	}
	return ""
}

// errStartFailed marks a generation whose processes started and then failed to become ready
// (a process died while starting, a step timed out): after a generation that served, most often
// what the previous one left behind, which a later start no longer meets.
var errStartFailed = errors.New("the generation failed to start")

type startFailed struct{ err error }

func (e *startFailed) Error() string   { return e.err.Error() }
func (e *startFailed) Unwrap() []error { return []error{e.err, errStartFailed} }

// startError marks err, from a step after the generation's processes were started, as a failed
// start; a binary that cannot be executed is not retried.
func startError(err error) error {
	var ce *cannotExec
	if err == nil || errors.As(err, &ce) {
		return err
	}
	return &startFailed{err: err}
}

// restartLog is the supervisor's record of its in-place restarts, for /status and the budget.
type restartLog struct {
	mu       sync.Mutex
	restarts podcontract.Restarts
	times    []time.Time // within the budget's window
}

// RunInPlace runs generations until ctx ends (nil) or an error no new generation can fix,
// starting each next one in place after a process death, an app's request for contexts, or
// another reason restartReason accepts, within Cfg.Restarts.
func (s *Supervisor) RunInPlace(ctx context.Context) error {
	for {
		err := s.Run(ctx)
		if err == nil {
			return nil
		}
		reason := s.restartReason(err)
		if reason == "" {
			return err
		}
		if over := s.spendRestart(reason, err.Error()); over != "" {
			s.health.failed.Store(true)
			s.health.set(over)
			return fmt.Errorf("%s: %w", over, err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// spendRestart records an in-place restart and says, when it is over the budget, why the
// supervisor exits instead.
func (s *Supervisor) spendRestart(reason, msg string) string {
	now := s.Now()
	b := s.Cfg.Restarts
	s.restartLog.mu.Lock()
	kept := s.restartLog.times[:0]
	for _, t := range s.restartLog.times {
		if now.Sub(t) < b.Window {
			kept = append(kept, t)
		}
	}
	s.restartLog.times = kept
	if len(kept) >= b.Max {
		s.restartLog.mu.Unlock()
		over := fmt.Sprintf("crash loop: %d restarts in place within %s already (--max-restarts=%d --restart-window=%s); exiting so that the kubelet restarts the container with its back-off", len(kept), b.Window, b.Max, b.Window)
		s.log.Error(over, "reason", reason, logging.KeyErr, msg)
		return over
	}
	s.restartLog.times = append(s.restartLog.times, now)
	s.restartLog.restarts.Add(reason, msg, now)
	total := s.restartLog.restarts.Total
	s.restartLog.mu.Unlock()
	s.metrics.RestartedInPlace(reason)
	s.log.Warn("restarting the dataplane in place: a new generation", "reason", reason, "restarts", total, "cause", msg)
	return ""
}

// SetPorts publishes the ports' links for /status (the link watch calls it); nil: none known.
func (s *Supervisor) SetPorts(ports []podcontract.PortStatus) {
	c := slices.Clone(ports)
	s.ports.Store(&c)
}

// appRestarts reads the launchers' records in the app-state volume, each as hostile input
// (podcontract.ReadAppRestarts); a record that cannot be read is left out and logged once.
// Only containers whose launcher restarted its app appear.
func (s *Supervisor) appRestarts() map[string]podcontract.Restarts {
	out := map[string]podcontract.Restarts{}
	for _, name := range appStateContainers(s.Cfg.Paths.AppStateDir, s.log) {
		r, err := podcontract.ReadAppRestarts(s.Cfg.Paths.AppStateDir, name)
		if err != nil {
			s.warnRecordOnce(name, err)
			continue
		}
		if r != nil && r.Total > 0 {
			out[name] = *r
		}
	}
	return out
}

func (s *Supervisor) warnRecordOnce(container string, err error) {
	if _, seen := s.badRecords.LoadOrStore(container, true); !seen {
		s.log.Warn("cannot read an app container's restart record: left out of /status and the metrics", logging.KeyContainer, container, logging.KeyErr, err)
	}
}

// status is /status's answer.
func (s *Supervisor) status() podcontract.Status {
	st := podcontract.Status{Ready: s.health.readyNow(), Reason: s.health.notReadyReason(), Ports: []podcontract.PortStatus{}}
	if b, err := fsutil.ReadFileBeneath(s.Cfg.Paths.ShimDir, podcontract.GenerationFile, maxGenerationBytes); err == nil {
		st.Generation, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	s.restartLog.mu.Lock()
	st.Restarts.Dataplane = s.restartLog.restarts
	st.Restarts.Dataplane.ByReason = cloneCounts(s.restartLog.restarts.ByReason)
	s.restartLog.mu.Unlock()
	st.Restarts.Apps = s.appRestarts()
	if p := s.ports.Load(); p != nil && len(*p) > 0 {
		st.Ports = slices.Clone(*p)
	}
	st.Placement = s.placement.Load()
	if len(st.Reason) > podcontract.AppBrokenMax {
		st.Reason = st.Reason[:podcontract.AppBrokenMax]
	}
	return st
}

func cloneCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// serveStatus answers podcontract.Status as JSON, within podcontract.StatusMax: when the app
// containers' records would make it longer, the containers last in name order are left out.
func (s *Supervisor) serveStatus(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	st := s.status()
	body, err := json.Marshal(st)
	for err == nil && len(body) > podcontract.StatusMax && len(st.Restarts.Apps) > 0 {
		names := slices.Sorted(maps.Keys(st.Restarts.Apps))
		delete(st.Restarts.Apps, names[len(names)-1])
		body, err = json.Marshal(st)
	}
	if err != nil || len(body) > podcontract.StatusMax {
		http.Error(w, "status does not fit its bound", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}
