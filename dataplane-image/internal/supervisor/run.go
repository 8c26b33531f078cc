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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/fftraffic"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/appprobe"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/metrics"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/readiness"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
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
	running    atomic.Pointer[podcontract.RunningConfig]
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

// clearReady withdraws the previous generation's ready marker before anything of this one.
func (g *generation) clearReady() error {
	s := g.s
	if err := removeReady(s.Cfg.Paths.ShimDir); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
}

// nextGeneration numbers the generation (the launchers restart their apps when it moves) and
// registers its collectors.
func (g *generation) nextGeneration() error {
	s := g.s
	s.health.started.Store(true)
	gen, err := bumpGeneration(s.Cfg.Paths.ShimDir)
	if err != nil {
		return err
	}
	g.gen, g.prefix = gen, FilePrefix(g.res.EAL[0])
	s.metrics.SetGeneration(gen)
	s.registerCollectors(g.prefix, len(g.res.EAL))
	s.log.Info("new generation", logging.KeyGeneration, gen, "processes", len(g.res.EAL), "lcoreMask", g.res.LcoreMask, "filePrefix", g.prefix)
	return nil
}

// startProcesses starts F-Stack's processes, or F-Stack's Nginx master and its workers, each
// ready before the next.
func (g *generation) startProcesses() error {
	s := g.s
	g.started = true
	if isNginx(&s.Cfg.Launch) {
		return g.startNginx()
	}
	return g.startAll()
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

// prepare loads the spec, gathers the facts, renders and writes config.ini.
func (g *generation) prepare() error {
	s := g.s
	res, err := s.render()
	if err != nil {
		return err
	}
	g.res = res
	return nil
}

func (s *Supervisor) render() (*render.Result, error) {
	spec, err := facts.LoadSpec(s.Cfg.Paths.SpecFile)
	if err != nil {
		return nil, err
	}
	facts, err := s.Facts.Gather(spec)
	if err != nil {
		return nil, err
	}
	res, err := render.Render(spec, facts)
	if err != nil {
		return nil, fmt.Errorf("render config.ini from the StackInstance spec and the pod's facts: %w", err)
	}
	for _, a := range facts.Attachments {
		if a.Server {
			if err := clearStaleSocket(a.SocketPath); err != nil {
				return nil, err
			}
		}
	}
	s.metrics.Expect(len(res.EAL))
	s.noHuge = res.Spec.DPDK.NoHuge
	if err := fsutil.WriteAtomic(s.Cfg.Paths.ConfigFile, res.Config, 0o644); err != nil {
		return nil, fmt.Errorf("write config.ini: %w", err)
	}
	// A copy beside the shim, for whoever debugs the app side.
	if err := fsutil.WriteAtomic(filepath.Join(s.Cfg.Paths.ShimDir, "config.ini"), res.Config, 0o644); err != nil {
		return nil, fmt.Errorf("write config.ini: %w", err)
	}
	s.setRunning(res)
	return res, nil
}

// placeShimFirst places the shim's files before anything starts: the kubelet starts the app
// containers once the postStart hook (wait-placed) sees the launcher there, and the launcher
// holds them until ready names this generation. A program linked with libfstack has no app
// container and no shim.
func (g *generation) placeShimFirst() error {
	s := g.s
	if s.Cfg.Launch.Native != "" {
		s.log.Info("native program: no shim to place", "mode", s.Cfg.Launch.Native, "argv", strings.Join(s.Cfg.Launch.NativeArgv, " "))
		return nil
	}
	t0 := time.Now()
	warning, err := placeShim(s.Cfg.Paths.ImageShimDir, s.Cfg.Paths.ShimDir, &g.res.Spec.Shim, s.Cfg.RequireShim)
	if err != nil {
		return err
	}
	// The copy is on every pod's start path: the log says what it costs.
	s.log.Info("shim placed", "dir", s.Cfg.Paths.ShimDir, "elapsed", time.Since(t0).Round(time.Millisecond).String())
	if warning != "" {
		s.log.Warn(warning)
	}
	return nil
}

// registerCollectors registers the scrape-time collectors once: Run runs again after a
// restart an app asked for.
func (s *Supervisor) registerCollectors(prefix string, procs int) {
	s.collectorsOnce.Do(func() {
		s.metrics.Reg.MustRegister(metrics.NewNICCollector(telemetry.SocketPath(s.Cfg.Paths.RuntimeDir, prefix), s.primaryPeer))
		if s.Traffic != nil {
			s.metrics.Reg.MustRegister(metrics.NewTrafficCollector(s.Traffic, procs))
		}
	})
}

// primaryPeer vets the telemetry socket's server against the running generation's primary: the
// runtime directory is shared with the app containers, and any of them can bind the socket's
// name.
func (s *Supervisor) primaryPeer() telemetry.Peer {
	return s.telemetryPeer(int(s.primaryPID.Load()))
}

// resolveFStack picks the fstack binary built with the spec's shim mode when none is given:
// the fstack server and libff_syscall.so share their build flags, so they come in pairs.
func (g *generation) resolveFStack() error {
	s := g.s
	l := &s.Cfg.Launch
	if l.Programs != nil || l.Native != "" || l.FStack != "" {
		return nil
	}
	mode := ShimMode(&g.res.Spec.Shim)
	l.FStack = filepath.Join(s.Cfg.Paths.ImageShimDir, mode, "fstack")
	if !exists(l.FStack) {
		return fmt.Errorf("the image has no fstack built for shim mode %s (%s); use an image built with that mode or change spec.shim", mode, l.FStack)
	}
	return nil
}

// childEnv relocates DPDK's runtime directory when the paths say so (DPDK appends /dpdk to
// RUNTIME_DIRECTORY).
func (s *Supervisor) childEnv() []string {
	env := slices.Clone(s.Env)
	if rd := s.Cfg.Paths.RuntimeDir; rd != podcontract.DPDKRuntimeDir {
		env = append(env, "RUNTIME_DIRECTORY="+filepath.Dir(rd))
	}
	return env
}

// startAll starts the primary, waits for it, then each secondary in turn. What it started is in
// g.procs, also on error, so that it is stopped.
func (g *generation) startAll() error {
	s := g.s
	res := g.res
	if p := s.Cfg.Launch.Programs; p != nil {
		p.Plan(res, func(msg string) { s.log.Warn(msg) })
	}
	for k := range res.EAL {
		argv, err := s.Cfg.Launch.Argv(res, s.Cfg.Paths.ConfigFile, k)
		if err != nil {
			return err
		}
		s.log.Info("starting process", logging.KeyProcess, k, "argv", strings.Join(argv, " "))
		c, err := startChild(k, argv, s.fstackEnv(res), s.log.With(logging.KeyProcess, k), g.end)
		if err != nil {
			return err
		}
		g.procs = append(g.procs, c)
		if k == 0 {
			s.primaryPID.Store(int64(c.cmd.Process.Pid))
		}
		s.metrics.Starts.WithLabelValues(fmt.Sprint(k)).Inc()
		if err := waitUntil(g.ctx, s.readyWhat(k), c, s.Cfg.Timing, s.readyCheck(g.prefix, portIDs(res), c)); err != nil {
			return err
		}
		s.metrics.ProcessUp(k)
		s.log.Info("process is up", logging.KeyProcess, k, logging.KeyPID, c.cmd.Process.Pid)
	}
	return nil
}

func (s *Supervisor) readyWhat(k int) string {
	if k == 0 {
		return "the primary's EAL init (runtime config, its lock and magic), its ports started and telemetry"
	}
	return "the secondary joining the primary"
}

func (s *Supervisor) readyCheck(prefix string, ports []int, c *child) func() error {
	rd := s.Cfg.Paths.RuntimeDir
	return func() error {
		var err error
		if c.id == 0 {
			err = readiness.PrimaryState(rd, prefix)
			if sock := telemetry.SocketPath(rd, prefix); err == nil && (exists(sock) || len(s.Cfg.ReadyTelemetry) > 0) {
				err = readiness.TelemetryAnswers(rd, prefix, ports, s.Cfg.ReadyTelemetry, s.telemetryPeer(c.cmd.Process.Pid))
			}
		} else {
			err = readiness.SecondaryJoined(rd, s.hugeDirIfUsed(), prefix, c.cmd.Process.Pid)
		}
		if err == nil {
			err = readiness.ReadyCommand(context.Background(), s.Cfg.ReadyCommand, c.id)
		}
		return err
	}
}

// portIDs are the DPDK ports of the rendered port_list, in order.
func portIDs(res *render.Result) []int {
	ids := make([]int, 0, len(res.PortIDs))
	for _, id := range res.PortIDs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// hugeDirIfUsed is where secondaries map the primary's pages; empty with --no-huge.
func (s *Supervisor) hugeDirIfUsed() string {
	if s.noHuge {
		return ""
	}
	return s.Cfg.Paths.HugePagesDir
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// publish writes the ready marker the launcher waits for (the shim is already in place).
func (g *generation) publish() error {
	s := g.s
	if err := writeReady(s.Cfg.Paths.ShimDir, g.gen); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	s.health.ready.Store(true)
	s.health.set("ready")
	return nil
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
