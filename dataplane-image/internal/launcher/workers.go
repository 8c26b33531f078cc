package launcher

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// When the app cannot serve. The launcher's child dying ends the container already; an app can
// also stay alive and serve nothing. Under the multi-SC shim one dead Nginx worker (the OOM
// killer's SIGKILL) is enough: every worker the master respawns gets no shim context and
// segfaults at once, then the master has none, while F-Stack still completes handshakes on its
// listening sockets (docs/fstack-rules.md §6). So the launcher watches the app's workers (the
// master's children; the pod shares one PID namespace, so they are in /proc): fewer of them
// than it configured, each up for MinWorkerAge, for longer than WorkerSettle means the app
// cannot serve. It then marks the app broken (podcontract.AppBrokenFile: every app probe of the
// container fails) and stops it as on SIGTERM.
//
// The launcher then starts the app again in this container (restart.go), through the whole
// start path (dataplane ready, enough shim contexts, asking for a dataplane restart when the
// killed processes leaked too many); the restart is counted in its record, which the dataplane
// exports, and a loop spends the restart budget, after which it exits with ExitAppBroken and
// the kubelet's restart count and back-off show it.

// ExitAppBroken is the exit code when the launcher stopped an app that could no longer serve
// (EX_SOFTWARE): kubelet restarts the container, under restartPolicy OnFailure too.
const ExitAppBroken = 70

// workerWatch judges, one look at a time, whether a master process keeps the workers it was
// configured with. Only workers that have lived minAge count, so a worker respawned in a loop
// and dying at once never does. The watch starts with the first worker it sees, or once the
// master is known to be past its start (masterUp), so a slow start is not judged (the startup
// and readiness probes are there for that), and a master whose only worker died between two
// looks, its respawns with it, is: it forks them right after it writes its pid file, so a
// worker killed within 200 ms of its fork left a master with none and a watch that never
// started (seen in the e2e suite: the app unready for good, its liveness probe passing).
type workerWatch struct {
	name     string // the app, for messages
	want     int
	minAge   time.Duration
	settle   time.Duration
	children func(pid int) []int

	seen       map[int]time.Time // live children and when each was first seen
	last       time.Time         // the last look
	started    bool
	shortSince time.Time // zero while enough workers are up
	up         int       // workers up at the last look
	died       int       // children gone since enough workers were last up
	// full are the workers last seen all up; reloaded is set when the master started workers
	// beside all of them (what nginx does on SIGHUP) or replaced them all.
	full     map[int]bool
	reloaded bool
}

func newWorkerWatch(name string, want int, minAge, settle time.Duration, children func(int) []int) *workerWatch {
	return &workerWatch{name: name, want: want, minAge: minAge, settle: settle, children: children, seen: map[int]time.Time{}}
}

// watchEvery spaces the looks: each reads the stat file of every process the launcher sees.
const watchEvery = 200 * time.Millisecond

// look is observe at most every watchEvery; a nil watch never finds anything.
func (w *workerWatch) look(master int, now time.Time) string {
	if w == nil || now.Sub(w.last) < watchEvery {
		return ""
	}
	w.last = now
	return w.observe(master, now)
}

// masterUp says the master is past its start: it has written its pid file, which Nginx does
// just before it forks its workers, or the launcher stopped waiting for that.
func (w *workerWatch) masterUp() {
	if w != nil {
		w.started = true
	}
}

// serving says whether the master had all its workers up at the last look: what a reload waits
// for before it stops the old Nginx.
func (w *workerWatch) serving() bool {
	return w != nil && w.started && w.up >= w.want
}

// observe takes one look at master's children at now. It returns why the app cannot serve once
// fewer than want workers have been up for settle, and "" otherwise.
func (w *workerWatch) observe(master int, now time.Time) string {
	live := map[int]bool{}
	up := 0
	for _, pid := range w.children(master) {
		live[pid] = true
		first, ok := w.seen[pid]
		if !ok {
			first, w.seen[pid] = now, now
		}
		if now.Sub(first) >= w.minAge {
			up++
		}
	}
	for pid := range w.seen {
		if !live[pid] {
			delete(w.seen, pid)
			w.died++
		}
	}
	w.up = up
	w.started = w.started || len(live) > 0
	if why := w.reload(live); why != "" {
		return why
	}
	switch {
	case !w.started:
		return ""
	case up >= w.want:
		w.shortSince, w.died = time.Time{}, 0
		w.full = map[int]bool{}
		for pid := range live {
			if now.Sub(w.seen[pid]) >= w.minAge {
				w.full[pid] = true
			}
		}
		return ""
	case w.shortSince.IsZero():
		w.shortSince = now
		return ""
	case now.Sub(w.shortSince) < w.settle:
		return ""
	}
	return fmt.Sprintf("%s has had %d of its %d workers up for %s (workers seen to die meanwhile: %d): it cannot serve",
		w.name, up, w.want, now.Sub(w.shortSince).Round(time.Millisecond), w.died)
}

// reload says why the master's workers were replaced, or "". A master that reloaded (SIGHUP
// reached it directly, not through the launcher) forks a new set of workers while the old ones
// finish; under the multi-SC shim every re-forked worker gets no context (docs/fstack-rules.md
// §6), so the app serves nothing from then on. One worker dying and respawned is not a reload:
// then a worker of the full set is gone before the new one appears.
func (w *workerWatch) reload(live map[int]bool) string {
	if len(w.full) == 0 {
		return ""
	}
	kept, fresh := 0, 0
	for pid := range live {
		if w.full[pid] {
			kept++
		} else {
			fresh++
		}
	}
	switch {
	case fresh == 0:
		return ""
	case kept == len(w.full):
		w.reloaded = true
		return fmt.Sprintf("%s's master started %d new workers beside its %d running ones: it was asked to reload", w.name, fresh, kept)
	case kept == 0 && len(w.full) > 1:
		w.reloaded = true
		return fmt.Sprintf("%s's master replaced all its %d workers: it reloaded, or they all died", w.name, len(w.full))
	}
	return ""
}

// childrenOf lists the live (not zombie) children of pid, from /proc/<pid>/stat of every process.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	parent := strconv.Itoa(pid)
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// state ppid
		if len(f) >= 2 && f[0] != "Z" && f[0] != "X" && f[1] == parent {
			out = append(out, child)
		}
	}
	return out
}

// appWatch is the launcher's watch of the app it started: nil when it knows no worker count.
func (l *Launcher) appWatch(a *app) *workerWatch {
	if !a.nginx || a.workers < 1 || l.WorkerSettle <= 0 {
		return nil
	}
	children := l.Children
	if children == nil {
		children = childrenOf
	}
	l.log().Info("watching nginx's workers: fewer up (each for minAge) for longer than settle stops the app", "workers", a.workers, "minAge", l.MinWorkerAge.String(), "settle", l.WorkerSettle.String())
	return newWorkerWatch("nginx", a.workers, l.MinWorkerAge, l.WorkerSettle, children)
}

// appStarting clears what a previous run of this container said about its app.
func (l *Launcher) appStarting() {
	if err := podcontract.ClearAppBroken(l.StateDir); err != nil {
		l.log().Warn("cannot clear the app-broken marker (the app probes fail while it is there)", "file", l.StateDir+"/"+podcontract.AppBrokenFile, logging.KeyErr, err)
	}
}

// appBroken marks the app broken, so its probes fail, and says what happens next.
func (l *Launcher) appBroken(why string) {
	l.log().Error(why + "; stopping it, then starting it again")
	if err := podcontract.WriteAppBroken(l.StateDir, why); err != nil {
		l.log().Warn("cannot mark the app broken for its probes", logging.KeyErr, err)
	}
}
