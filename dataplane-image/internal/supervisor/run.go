package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/fftraffic"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/appprobe"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/metrics"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Supervisor runs one pod's F-Stack.
type Supervisor struct {
	Cfg   Config
	Facts *facts.FactSource
	// Env is the children's environment.
	Env []string
	// Traffic reads ff_traffic counters; nil when the image has no ff_traffic.
	Traffic *fftraffic.Reader
	// Now is the clock.
	Now func() time.Time
	// Contexts counts the shim's free contexts per instance; nil: made from Cfg.ShimContexts.
	Contexts contexts.ContextSource

	log            *slog.Logger
	noHuge         bool
	health         health
	metrics        *metrics.Metrics
	ctxm           *contextMetrics
	ctxmOnce       sync.Once
	collectorsOnce sync.Once
	app            *appprobe.Prober
	// httpLimits bound the callers of Serve (http.go); tests shorten them.
	httpLimits httpLimits
	// served is set once a generation of this supervisor was ready (restart.go).
	served     bool
	restartLog restartLog
	ports      atomic.Pointer[[]podcontract.PortStatus]
	// running is what the current generation was rendered with, for /config (config.go).
	running atomic.Pointer[podcontract.RunningConfig]
	// placement is where the lcores run (facts.Gather), for /status.
	placement  atomic.Pointer[podcontract.Placement]
	badRecords sync.Map // containers whose restart record could not be read, logged once
	// links are the port link metrics (linkwatch.go), kept across generations.
	links linkMetrics
	// primaryPID is the process this generation started as its primary (Nginx: the master, whose
	// worker 0 is the primary); 0 when none runs. Only that process tree may serve telemetry.
	primaryPID atomic.Int64
	// telemetryPeer says which processes may serve the telemetry socket, given primaryPID; the
	// unit tier's fake telemetry runs in the test process and widens it.
	telemetryPeer func(primary int) telemetry.Peer
}

// New makes a supervisor that logs (its own lines and its children's) to out, in the format
// cfg.Logging chooses (text when it is not one: the caller checks it first), every line
// naming the pod and its stack.
func New(cfg Config, fs *facts.FactSource, out io.Writer) *Supervisor {
	h, err := logging.NewHandler(out, cfg.Logging)
	if err != nil {
		h, _ = logging.NewHandler(out, logging.Options{})
	}
	log := slog.New(h).With(append([]any{logging.KeyComponent, logging.ComponentSupervisor}, podIdentity(cfg.Paths.PodInfoDir)...)...)
	s := &Supervisor{Cfg: cfg, Facts: fs, Env: os.Environ(), Now: time.Now,
		log: log, metrics: metrics.New(), httpLimits: defaultHTTPLimits, telemetryPeer: telemetry.ProcessOf}
	s.app = s.newProber()
	s.metrics.Reg.MustRegister(&metrics.AppRestartsCollector{Read: s.appRestarts})
	if fs != nil && fs.Logf == nil {
		fs.Logf = func(format string, args ...any) { s.log.Info(fmt.Sprintf(format, args...)) }
	}
	return s
}

// Logger is the supervisor's log, for its caller's own lines.
func (s *Supervisor) Logger() *slog.Logger { return s.log }

// Run renders the config and runs one generation of F-Stack until a process dies (an error
// naming it, which RunInPlace restarts in place) or ctx ends (nil after stopping every process).
// A setup problem is an error naming the fact. The start is the two lists of steps below, in
// their order.
func (s *Supervisor) Run(ctx context.Context) error {
	g := s.newGeneration(ctx)
	defer g.close()
	s.health.failed.Store(false) // a generation started in place starts afresh
	s.health.set("starting")
	// Before any process: what fails here (the spec, the facts, the image) fails again in a new
	// generation.
	if err := g.run(g.prepare, g.checkProgram, g.resolveFStack, g.clearReady, g.resetContexts, g.placeShimFirst, g.nextGeneration); err != nil {
		s.health.set(err.Error())
		return err
	}
	if err := g.run(g.awaitOldSecondaries, g.startProcesses, g.watchContexts, g.startProbeAgent, g.publish); err != nil {
		return g.abandonStart(err)
	}
	g.serving()
	return g.watch()
}

// abandonStart stops what a failed start started; a stop meanwhile is no failure.
func (g *generation) abandonStart(err error) error {
	s := g.s
	if g.started {
		s.health.failed.Store(true)
	}
	s.health.set(err.Error())
	if g.started {
		g.shutdown()
	}
	if g.stopped() {
		s.log.Info("stopped while starting", logging.KeyGeneration, g.gen)
		return nil
	}
	return startError(err)
}

// serving is the generation ready: what it took, and the watches of a running generation.
func (g *generation) serving() {
	s := g.s
	s.served = true
	elapsed := s.Now().Sub(g.begin)
	s.metrics.TimeToReady.Set(elapsed.Seconds())
	s.log.Info("ready", logging.KeyGeneration, g.gen, "processes", len(g.res.EAL), "elapsed", elapsed.Round(time.Millisecond).String())
	g.links = g.watchLinks()
	g.watchWorkers()
}

// watch waits for the generation's end and answers for its cause: a process exit (an
// inPlaceError: RunInPlace starts the next generation), a restart request, a port down too long
// (ErrPortDown, restarted in place too), or a stop (nil). /healthz stays healthy meanwhile: the
// container is not to be restarted for what a new generation fixes.
func (g *generation) watch() error {
	s := g.s
	<-g.ctx.Done()
	if g.stopped() {
		s.log.Info("stopping: SIGTERM to the secondaries, then the primary; SIGKILL after the grace", "grace", s.Cfg.Timing.Grace.String())
		g.shutdown()
		return nil
	}
	cause := context.Cause(g.ctx)
	var exit *processExit
	var gone *inPlaceError
	switch {
	case errors.As(cause, &exit):
		c := exit.c
		msg := exit.Error()
		if g.nginx != nil {
			msg = fmt.Sprintf("F-Stack's Nginx master exited: %s; its workers, the F-Stack processes, are stopped with it", c.status())
		} else if c.id == 0 {
			msg += "; a dead primary strands every secondary, so the whole dataplane stops"
		}
		s.health.ready.Store(false)
		s.health.set(msg)
		s.log.Error(msg, logging.KeyProcess, c.id, logging.KeyPID, c.cmd.Process.Pid)
		cause = &inPlaceError{reason: podcontract.DataplaneRestartProcessExit, msg: msg}
	case errors.As(cause, &gone): // a worker of F-Stack's Nginx
		s.health.ready.Store(false)
		s.health.set(gone.msg)
		s.log.Error(gone.msg)
	case errors.Is(cause, ErrPortDown):
		s.health.set(cause.Error()) // the link watch logged it
	}
	g.shutdown()
	return cause
}

// shutdown withdraws readiness first (apps must not attach to what is going away), stops every
// process, and deletes the primary's hugepage files, which would otherwise hold the pod's pages.
func (g *generation) shutdown() {
	s := g.s
	s.health.ready.Store(false)
	s.stopProbeAgent() // first: a shim client left behind spins on a stopped F-Stack
	if err := removeReady(s.Cfg.Paths.ShimDir); err != nil {
		s.log.Error("cannot remove the ready file", logging.KeyErr, err)
	}
	order := slices.Clone(g.procs)
	slices.Reverse(order)
	stopAll(order, s.Cfg.Timing.Grace)
	s.primaryPID.Store(0)
	g.nginx.KillGroup() // workers a killed master left behind
	s.metrics.AllDown()
	files, _ := filepath.Glob(filepath.Join(s.Cfg.Paths.HugePagesDir, g.prefix+"map_*"))
	for _, f := range files {
		_ = os.Remove(f)
	}
	for _, c := range g.procs {
		s.log.Info("process stopped", logging.KeyProcess, c.id, logging.KeyPID, c.cmd.Process.Pid, "status", c.status())
	}
}
