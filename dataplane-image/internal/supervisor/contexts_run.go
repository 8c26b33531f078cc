package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// ErrRestartRequested ends Run when an app asked for a dataplane restart because it would start
// short of shim contexts; the caller runs the supervisor again (a new generation, fresh zones).
var ErrRestartRequested = errors.New("an app asked for a dataplane restart")

// contextMetrics are the shim context gauges, registered once for every generation.
type contextMetrics struct {
	free, capacity *prometheus.GaugeVec
	up             prometheus.Gauge
	restarts       prometheus.Counter
}

func (s *Supervisor) contextMetrics() *contextMetrics {
	s.ctxmOnce.Do(s.newContextMetrics)
	return s.ctxm
}

func (s *Supervisor) newContextMetrics() {
	m := &contextMetrics{
		free: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fstack_shim_contexts_free",
			Help: "Free shim contexts of each F-Stack instance (process, by proc_id; of 32): a context held only by processes killed with SIGKILL comes back within a second (F-Stack patch 0007)."}, []string{"process"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fstack_shim_contexts_capacity",
			Help: "Shim contexts of each F-Stack instance (process, by proc_id)."}, []string{"process"}),
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fstack_shim_contexts_read_up",
			Help: "1 if the last reading of the shim contexts succeeded."}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "fstack_dataplane_restarts_for_contexts_total",
			Help: "Dataplane restarts an app asked for because it would have started short of shim contexts."}),
	}
	s.metrics.Reg.MustRegister(m.free, m.capacity, m.up, m.restarts)
	s.ctxm = m
}

// contextWatch publishes readings of one generation and turns a justified restart request into
// a restart.
type contextWatch struct {
	s   *Supervisor
	src contexts.ContextSource
	gen int
	// restart ends the generation (ErrRestartRequested); cancel and done end the readings.
	restart context.CancelCauseFunc
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

// watchContexts makes the generation's first reading and keeps reading every
// ContextsInterval. The first reading is part of the start: F-Stack creates its zones only after
// ff_init returns, seconds after its port is up (docs/fstack-rules.md §9), and a launcher that found
// no reading at ready would start its app without checking the contexts. So it waits, bounded
// like every start step, until every instance's contexts have been read once. Without a source
// nothing is watched.
func (g *generation) watchContexts() error {
	s := g.s
	src := s.Contexts
	if src == nil {
		return nil
	}
	if err := src.Reset(g.procs[0].cmd.Process.Pid, len(g.procs)); err != nil {
		return err
	}
	w := &contextWatch{s: s, src: src, gen: g.gen, restart: g.end, done: make(chan struct{})}
	s.log.Info("shim contexts: read every interval", "source", src.Name(), "interval", w.interval().String(), logging.KeyGeneration, g.gen)
	first := func() error {
		if st := w.publish(); st.Error != "" {
			return errors.New(st.Error)
		}
		return nil
	}
	if err := startStep(g.ctx, "the shim's contexts of every F-Stack process read once ("+src.Name()+")", s.Cfg.Timing, first); err != nil {
		return err
	}
	w.ctx, w.cancel = context.WithCancel(g.ctx)
	g.contexts = w
	go w.loop()
	return nil
}

func (w *contextWatch) loop() {
	defer close(w.done)
	t := time.NewTicker(w.interval())
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		st := w.publish()
		if w.justified(st) {
			w.restart(ErrRestartRequested)
			return
		}
	}
}

func (w *contextWatch) interval() time.Duration {
	if w.s.Cfg.ContextsInterval > 0 {
		return w.s.Cfg.ContextsInterval
	}
	return 100 * time.Millisecond
}

// Stop ends the readings (nil-safe).
func (w *contextWatch) Stop() {
	if w == nil {
		return
	}
	w.cancel()
	<-w.done
}

// publish reads every instance, updates the metrics and writes the state for the launchers.
func (w *contextWatch) publish() *shimctx.State {
	m := w.s.contextMetrics()
	st := &shimctx.State{Generation: w.gen, ReadAt: shimctx.Now(), Source: w.src.Name()}
	inst, err := w.src.Read()
	if err != nil {
		st.Error = err.Error()
		m.up.Set(0)
	} else {
		st.Instances = inst
		m.up.Set(1)
		for k, in := range inst {
			m.free.WithLabelValues(strconv.Itoa(k)).Set(float64(in.Free))
			m.capacity.WithLabelValues(strconv.Itoa(k)).Set(float64(in.Capacity))
		}
	}
	if err := shimctx.Write(w.s.Cfg.Paths.ShimDir, shimctx.StateFile, st); err != nil {
		w.s.log.Error("shim contexts: cannot publish the reading", logging.KeyErr, err)
	}
	return st
}

// justified reads the pending requests, one per app container's directory of the app-state
// volume: one is honoured when it names this generation and the reading confirms the shortage;
// the others are removed (their launchers then check again).
func (w *contextWatch) justified(st *shimctx.State) bool {
	root := w.s.Cfg.Paths.AppStateDir
	for _, c := range appStateContainers(root, w.s.log) {
		if w.justifiedFor(st, root, c) {
			return true
		}
	}
	return false
}

func (w *contextWatch) justifiedFor(st *shimctx.State, root, container string) bool {
	rel := container + "/" + shimctx.RequestFile
	r, err := shimctx.ReadRequest(root, container)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	switch {
	case err != nil:
		w.s.log.Warn("shim contexts: ignoring a restart request", logging.KeyContainer, container, logging.KeyErr, err)
		_ = shimctx.Remove(root, rel)
		return false
	case r.Generation != w.gen:
		_ = shimctx.Remove(root, rel)
		return false
	case st.Error != "":
		w.decline(r, fmt.Sprintf("the contexts cannot be read (%s)", st.Error))
		return false
	}
	short := st.Short(r.Need)
	if len(short) == 0 {
		w.decline(r, "enough are free now")
		return false
	}
	// The request stays until the next generation clears it: the launcher waits for that
	// generation, and must not take the request's disappearance for an answer.
	w.s.contextMetrics().restarts.Inc()
	w.s.log.Warn("shim contexts: the container would start short: restarting the dataplane for fresh zones (this generation ends)", logging.KeyContainer, r.Container, "short", fmt.Sprint(short), logging.KeyGeneration, w.gen)
	return true
}

// decline answers a request that is not honoured (the launcher then checks again).
func (w *contextWatch) decline(r *shimctx.Request, why string) {
	w.s.log.Info("shim contexts: the container asks for a restart, but "+why+": not restarting", logging.KeyContainer, r.Container)
	if err := shimctx.Decline(w.s.Cfg.Paths.ShimDir, r); err != nil {
		w.s.log.Error("shim contexts: cannot decline the request", logging.KeyContainer, r.Container, logging.KeyErr, err)
	}
	_ = shimctx.Remove(w.s.Cfg.Paths.AppStateDir, r.Container+"/"+shimctx.RequestFile)
}

// maxAppContainers bounds the directories read from the app-state volume: the kubelet makes one
// per app container, and only the dataplane could add more.
const maxAppContainers = 256

// appStateContainers lists the app containers' directories of the app-state volume (none when
// it is missing: a pod injected without it has no app side that writes).
func appStateContainers(root string, log *slog.Logger) []string {
	d, err := fsutil.OpenDir(root)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Error("app state: cannot read the volume", logging.KeyErr, err)
		}
		return nil
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil {
		log.Error("app state: cannot list the volume", logging.KeyErr, err)
		return nil
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		if st, err := d.Lstat(n); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			out = append(out, n)
		}
		if len(out) == maxAppContainers {
			break
		}
	}
	return out
}

// CheckShimContexts says whether ShimContexts names a kind this build knows, the flag's error
// otherwise.
func (c *Config) CheckShimContexts() error {
	switch _, extra := c.ContextKinds[c.ShimContexts]; {
	case extra, c.ShimContexts == contexts.ContextsZone, c.ShimContexts == contexts.ContextsOff, c.ShimContexts == "":
		return nil
	}
	extra := slices.Sorted(maps.Keys(c.ContextKinds))
	kinds := append([]string{contexts.ContextsZone, contexts.ContextsOff}, extra...)
	return fmt.Errorf("--shim-contexts=%s: want one of %s", c.ShimContexts, strings.Join(kinds, ", "))
}

// contextSource makes the source --shim-contexts names.
func (c *Config) contextSource(prefix string) (contexts.ContextSource, error) {
	if err := c.CheckShimContexts(); err != nil {
		return nil, err
	}
	if mk, ok := c.ContextKinds[c.ShimContexts]; ok {
		return mk(c.Paths.RuntimeDir, prefix), nil
	}
	if c.ShimContexts == contexts.ContextsZone {
		return contexts.NewZoneSource(c.Paths.RuntimeDir, prefix), nil
	}
	return nil, nil
}

// resetContexts makes the source when none was given and clears the previous generation's
// state and requests: the launcher must not read a dead generation's counts as current.
func (g *generation) resetContexts() error {
	s := g.s
	res := g.res
	if sh := g.spec.Shim.Enabled; sh == nil || !*sh {
		s.Contexts = nil // no shim, no contexts: the launcher then checks nothing
	} else if s.Contexts == nil {
		src, err := s.Cfg.contextSource(FilePrefix(res.EAL[0]))
		if err != nil {
			return err
		}
		s.Contexts = src
	}
	if err := shimctx.Remove(s.Cfg.Paths.ShimDir, shimctx.StateFile); err != nil {
		return fmt.Errorf("shim contexts: %w", err)
	}
	for _, c := range appStateContainers(s.Cfg.Paths.AppStateDir, s.log) {
		if err := shimctx.Remove(s.Cfg.Paths.AppStateDir, c+"/"+shimctx.RequestFile); err != nil {
			return fmt.Errorf("shim contexts: %w", err)
		}
		if err := shimctx.Remove(s.Cfg.Paths.ShimDir, shimctx.DeclinedDir+"/"+c); err != nil {
			return fmt.Errorf("shim contexts: %w", err)
		}
	}
	return nil
}
