package supervisor

import (
	"path/filepath"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/appprobe"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// newProber makes the app probes' server (appprobe): it asks the supervisor whether the
// dataplane is ready and whether a caller is the node.
func (s *Supervisor) newProber() *appprobe.Prober {
	return appprobe.New(appprobe.Config{Probes: s.Cfg.AppProbes, AppStateDir: s.Cfg.Paths.AppStateDir, Log: s.log,
		Registry: s.metrics.Reg, Now: func() time.Time { return s.Now() }, FromNode: s.fromNode, OutOfStarts: s.agentOutOfStarts,
		Ready: func() (bool, string) { return s.health.ready.Load(), s.health.text() }})
}

// AgentShimMode is the shim build the probe agent preloads: the spec's, without multi-sc, which
// makes every socket() attach another of the instance's 32 contexts and keep it until exit (one
// probe each), and without polling, which only changes epoll_wait. Both change only the client
// side of the shim; the requests a client sends (socket, connect, read, write, close) are served
// the same way by every fstack build.
func AgentShimMode(sh *fsv1.ShimSpec) string {
	c := *sh
	c.MultiSC, c.Polling = new(false), false
	return ShimMode(&c)
}

// startProbeAgent is the start's last step when the pod has app probes: the agent is started
// and has attached to F-Stack before the dataplane reports ready (appprobe.Prober.Start).
func (g *generation) startProbeAgent() error {
	s := g.s
	if s.app.Count() == 0 {
		if err := s.app.Err(); err != nil {
			s.log.Error("app probes: every app probe fails", logging.KeyErr, err)
		}
		return nil
	}
	mode := AgentShimMode(&g.spec.Shim)
	lib := filepath.Join(s.Cfg.Paths.ImageShimDir, mode, podcontract.ShimLibrary)
	env, cpu, note := appprobe.Env(s.childEnv(), lib, mode, exists(lib), g.res)
	s.log.Info("app probes performed by the probe agent through F-Stack", "probes", s.app.Count(), logging.KeyProgram, appprobe.AgentName, "binary", s.Cfg.ProbeAgent, "cpu", cpu, "addr", appprobe.Addr, "note", note)
	return s.app.Start(g.ctx, s.Cfg.ProbeAgent, env, s.Cfg.Timing.StartTimeout)
}

// agentOutOfStarts fails the dataplane's liveness: without an agent every app probe fails, and
// only a restart of the dataplane (fresh zones give back the contexts the agents leaked, and a
// fresh budget) can bring one back. The kubelet's restart is the visible event.
func (s *Supervisor) agentOutOfStarts(msg string) {
	s.health.failed.Store(true)
	s.health.set(msg)
}

func (s *Supervisor) stopProbeAgent() { s.app.Stop() }
