package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/metrics"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/readiness"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// The steps of a generation's start, in Run's order, and what they share; the steps of their
// own concern are beside it (nginx.go, contexts_run.go, holders.go, probes.go).

// prepare loads the spec, gathers the facts, renders and writes config.ini.
func (g *generation) prepare() error {
	s := g.s
	spec, res, err := s.render()
	if err != nil {
		return err
	}
	g.spec, g.res = spec, res
	return nil
}

// render returns the spec's defaulted form and what it renders to with the pod's facts.
func (s *Supervisor) render() (*fsv1.StackInstanceSpec, *render.Result, error) {
	checked, err := facts.LoadSpec(s.Cfg.Paths.SpecFile)
	if err != nil {
		return nil, nil, err
	}
	facts, err := s.Facts.Gather(checked)
	if err != nil {
		return nil, nil, err
	}
	res, err := render.Render(checked, facts)
	if err != nil {
		return nil, nil, fmt.Errorf("render config.ini from the StackInstance spec and the pod's facts: %w", err)
	}
	for _, a := range facts.Attachments {
		if a.Server {
			if err := clearStaleSocket(a.SocketPath); err != nil {
				return nil, nil, err
			}
		}
	}
	spec := checked.Defaulted()
	s.metrics.Expect(len(res.EAL))
	s.noHuge = spec.DPDK.NoHuge
	if err := fsutil.WriteAtomic(s.Cfg.Paths.ConfigFile, res.Config, 0o644); err != nil {
		return nil, nil, fmt.Errorf("write config.ini: %w", err)
	}
	// A copy beside the shim, for whoever debugs the app side.
	if err := fsutil.WriteAtomic(filepath.Join(s.Cfg.Paths.ShimDir, "config.ini"), res.Config, 0o644); err != nil {
		return nil, nil, fmt.Errorf("write config.ini: %w", err)
	}
	if err := s.recordPlacement(facts.Placement); err != nil {
		return nil, nil, err
	}
	s.setRunning(spec, res)
	return spec, res, nil
}

// recordPlacement writes where the lcores run beside the shim, before the launcher is placed,
// so every app start keeps its workers off them (podcontract.AppCPUs), and says what they share.
func (s *Supervisor) recordPlacement(p *podcontract.Placement) error {
	if p == nil {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("placement: %w", err)
	}
	if err := fsutil.WriteAtomic(filepath.Join(s.Cfg.Paths.ShimDir, podcontract.PlacementFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", podcontract.PlacementFile, err)
	}
	if prev := s.placement.Swap(p); prev == nil || !slices.Equal(prev.LcoreCPUs, p.LcoreCPUs) {
		s.log.Info("lcores placed", "lcoreCPUs", render.FormatCPUList(p.LcoreCPUs), "switchCPUs", render.FormatCPUList(p.SwitchCPUs))
		for _, w := range p.Warnings {
			s.log.Warn("placement: " + w)
		}
	}
	return nil
}

// resolveFStack picks the fstack binary built with the spec's shim mode when none is given:
// the fstack server and libff_syscall.so share their build flags, so they come in pairs.
func (g *generation) resolveFStack() error {
	s := g.s
	l := &s.Cfg.Launch
	if l.Programs != nil || l.Native != "" || l.FStack != "" {
		return nil
	}
	mode := ShimMode(&g.spec.Shim)
	l.FStack = filepath.Join(s.Cfg.Paths.ImageShimDir, mode, "fstack")
	if !exists(l.FStack) {
		return fmt.Errorf("the image has no fstack built for shim mode %s (%s); use an image built with that mode or change spec.shim", mode, l.FStack)
	}
	return nil
}

// clearReady withdraws the previous generation's ready marker before anything of this one.
func (g *generation) clearReady() error {
	s := g.s
	if err := removeReady(s.Cfg.Paths.ShimDir); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
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
	warning, err := placeShim(s.Cfg.Paths.ImageShimDir, s.Cfg.Paths.ShimDir, &g.spec.Shim, s.Cfg.RequireShim)
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
		if err := waitUntil(g.ctx, s.readyWhat(k), c, s.Cfg.Timing, g.readyCheck(portIDs(res), c)); err != nil {
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

// readyCheck says whether process c is ready: DPDK's state, then Cfg.ReadyCommand, which ends
// with the generation.
func (g *generation) readyCheck(ports []int, c *child) func() error {
	s, prefix := g.s, g.prefix
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
			err = readiness.ReadyCommand(g.ctx, s.Cfg.ReadyCommand, c.id)
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

// childEnv relocates DPDK's runtime directory when the paths say so (DPDK appends /dpdk to
// RUNTIME_DIRECTORY).
func (s *Supervisor) childEnv() []string {
	env := slices.Clone(s.Env)
	if rd := s.Cfg.Paths.RuntimeDir; rd != podcontract.DPDKRuntimeDir {
		env = append(env, "RUNTIME_DIRECTORY="+filepath.Dir(rd))
	}
	return env
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
