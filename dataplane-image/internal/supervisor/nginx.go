package supervisor

import (
	"context"
	"fmt"
	"strings"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/native"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/readiness"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// F-Stack's Nginx (spec.program mode Nginx): the supervisor starts the master alone, and the
// processes it waits for, counts and watches are the workers the master forks (native.Master).

func isNginx(l *Launch) bool { return l.Native == fsv1.ProgramNginx }

// checkProgram holds the container's command line to the spec (native.Check).
func (g *generation) checkProgram() error {
	s := g.s
	return native.Check(s.Cfg.Launch.Native, g.spec)
}

// nginxCommand is the master's command line, judged against the stack; asking the binary for
// its build ends with the generation.
func (g *generation) nginxCommand() ([]string, error) {
	s := g.s
	build := s.Cfg.Launch.NginxBuild
	if build == nil {
		build = func(ctx context.Context, bin string) (nginxconf.Build, error) {
			return nginxconf.QueryBuild(ctx, bin, s.childEnv())
		}
	}
	n := native.Nginx{Argv: s.Cfg.Launch.NativeArgv, Build: build, Config: s.Cfg.Paths.ConfigFile,
		Logf: func(msg string) { s.log.Info(msg) }}
	return n.Command(g.ctx, g.res)
}

// startNginx starts the master and waits for its workers in F-Stack's order: the primary
// ready, then each secondary joined. g.procs holds the master only; g.nginx is set once every
// worker is up.
func (g *generation) startNginx() error {
	s := g.s
	argv, err := g.nginxCommand()
	if err != nil {
		return err
	}
	s.log.Info("starting F-Stack's Nginx master", "argv", strings.Join(argv, " "))
	// The master's output is its workers' too (they inherit it): it is Nginx's, not process 0's.
	c, err := startChild(0, argv, s.fstackEnv(g.res), s.log.With(logging.KeyProgram, "nginx"), g.end)
	if err != nil {
		return err
	}
	g.procs = []*child{c}
	m := &native.Master{PID: c.cmd.Process.Pid}
	s.primaryPID.Store(int64(m.PID))
	primary := g.readyCheck(portIDs(g.res), c)
	if err := waitUntil(g.ctx, "worker 0 (the primary): "+s.readyWhat(0), c, s.Cfg.Timing, func() error {
		if err := primary(); err != nil {
			return err
		}
		return m.FirstWorker()
	}); err != nil {
		return err
	}
	s.workerUp(0, m.Workers[0])
	for k := 1; k < len(g.res.EAL); k++ {
		joined := func(pid int) error { return g.workerJoined(k, pid) }
		if err := waitUntil(g.ctx, fmt.Sprintf("worker %d: %s", k, s.readyWhat(k)), c, s.Cfg.Timing, func() error {
			return m.NextWorker(k, joined)
		}); err != nil {
			return err
		}
		s.workerUp(k, m.Workers[k])
	}
	g.nginx = m
	return nil
}

// workerJoined says whether pid, a child of the master, is worker k: a DPDK secondary joined
// to the primary, and ready by Cfg.ReadyCommand.
func (g *generation) workerJoined(k, pid int) error {
	s := g.s
	if err := readiness.SecondaryJoined(s.Cfg.Paths.RuntimeDir, s.hugeDirIfUsed(), g.prefix, pid); err != nil {
		return err
	}
	return readiness.ReadyCommand(g.ctx, s.Cfg.ReadyCommand, k)
}

func (s *Supervisor) workerUp(k, pid int) {
	s.metrics.Starts.WithLabelValues(fmt.Sprint(k)).Inc()
	s.metrics.ProcessUp(k)
	s.log.Info("process is up (an nginx worker)", logging.KeyProcess, k, logging.KeyPID, pid)
}

// watchWorkers ends the generation when a worker is gone, an inPlaceError naming it the cause.
func (g *generation) watchWorkers() {
	s := g.s
	g.nginx.Watch(g.ctx, 5*s.Cfg.Timing.Poll, func(why string) {
		g.end(&inPlaceError{reason: podcontract.DataplaneRestartProcessExit, msg: why})
	})
}
