package supervisor

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/cpuaffinity"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// appProbeAddr is where the agent reaches the app: F-Stack's loopback. It answers whatever
// address the app's listener is bound to as long as that is the wildcard (Nginx's `listen 80`),
// without knowing which F-Stack port or address the spec gave it. With FF_LOOPBACK_SUPPORT a
// shim client reaches the app there (docs/fstack-rules.md §5).
const appProbeAddr = "127.0.0.1"

// agentMargin is kept from a probe's timeout for the answer to reach the kubelet.
const agentMargin = 100 * time.Millisecond

// appProbing serves the pod's rewritten app probes (podcontract.EnvAppProbes).
type appProbing struct {
	probes podcontract.AppProbes
	err    error // EnvAppProbes could not be read: every probe fails with it
	agent  atomic.Pointer[probeAgent]
	mu     sync.Mutex
	failed map[string]bool // last result per path, to log changes only
	// flight shares one probe among the callers of the same path: the agent performs one
	// request at a time, so without it a burst of callers queued ahead of the kubelet's probe
	// until that timed out (and the kubelet restarted the app).
	flight singleflight.Group
}

func newAppProbing(raw string) *appProbing {
	probes, err := podcontract.ParseAppProbes(raw)
	return &appProbing{probes: probes, err: err, failed: map[string]bool{}}
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
// and has attached to F-Stack (and answered a ping) before the dataplane reports ready, so the
// app's first probes are performed, not refused.
func (s *Supervisor) startProbeAgent(res *render.Result, procs []*child, stop <-chan struct{}) error {
	if len(s.app.probes) == 0 {
		if s.app.err != nil {
			s.log.Error("app probes: every app probe fails", logging.KeyErr, s.app.err)
		}
		return nil
	}
	env, cpu, note := s.agentEnv(res)
	s.log.Info("app probes performed by the probe agent through F-Stack", "probes", len(s.app.probes), logging.KeyProgram, probeAgentName, "binary", s.Cfg.ProbeAgent, "cpu", cpu, "addr", appProbeAddr, "note", note)
	a := newProbeAgent(s.Cfg.ProbeAgent, env, s.log)
	s.agentMetricsOnce.Do(func() {
		s.agentMetrics = a.metrics
		s.agentMetrics.register(s.metrics.Reg)
	})
	a.metrics, a.exhausted = s.agentMetrics, s.agentOutOfStarts
	a.metrics.exhausted.Set(0)
	s.app.agent.Store(a)
	abort, release := interrupted(procs, stop)
	defer release()
	_, err := a.running(s.Now().Add(s.Cfg.Timing.StartTimeout), abort)
	for err != nil && !errors.Is(err, errStopped) && !errors.Is(err, errTimedOut) && a.startsLeft() {
		s.log.Warn("probe agent: starting another", logging.KeyProgram, probeAgentName, logging.KeyErr, err)
		_, err = a.running(s.Now().Add(s.Cfg.Timing.StartTimeout), abort)
	}
	if errors.Is(err, errStopped) {
		return stepAborted(procs)
	}
	if err != nil {
		return fmt.Errorf("not ready within %s: the probe agent attaching to F-Stack: %w", s.Cfg.Timing.StartTimeout, err)
	}
	return nil
}

// agentOutOfStarts fails the dataplane's liveness: without an agent every app probe fails, and
// only a restart of the dataplane (fresh zones give back the contexts the agents leaked, and a
// fresh budget) can bring one back. The kubelet's restart is the visible event.
func (s *Supervisor) agentOutOfStarts(msg string) {
	s.health.failed.Store(true)
	s.health.set(msg)
}

func (s *Supervisor) stopProbeAgent() {
	if a := s.app.agent.Swap(nil); a != nil {
		a.stop(podcontract.ProbeAgentStopGrace)
	}
}

// agentEnv is the agent's environment: the shim as an app gets it, with FF_INITIAL_LCORE_ID on
// the CPU of the last F-Stack process. The agent must run on a CPU of this container (EAL pins
// it there; a CPU outside the cpuset makes the shim fall back to kernel sockets), and every one
// is an F-Stack process's lcore. A shim client shares no per-lcore state with that process (it
// only uses rte_malloc, whose heap is locked, and the context's spinlock), so the same lcore id
// is safe; but it busy-waits for each answer, so it stays off process 0's CPU when there is
// another: process 0 answers it (FF_PROC_ID 0), and a client spinning on that CPU would delay
// its own answer and the primary's traffic. The shim ignores an FF_INITIAL_LCORE_ID above lcore
// 50 (INITIAL_LCORE_ID_MAX), so a CPU up to 50 is preferred.
func (s *Supervisor) agentEnv(res *render.Result) ([]string, int, string) {
	env := s.childEnv()
	mode := AgentShimMode(&res.Spec.Shim)
	lib := filepath.Join(s.Cfg.Paths.ImageShimDir, mode, podcontract.ShimLibrary)
	note := "shim " + mode
	if exists(lib) {
		env = append(env, podcontract.EnvPreload+"="+lib)
	} else {
		note = "WARNING: the image has no " + lib + ", the agent uses kernel sockets"
	}
	cpu, ok := agentCPU(res)
	if !ok {
		note += fmt.Sprintf("; WARNING: every F-Stack CPU is above %d, which the shim ignores: the agent falls back to kernel sockets", podcontract.MaxShimLcore)
	}
	env = append(env, podcontract.EnvShimInstances+"="+strconv.Itoa(len(res.EAL)),
		podcontract.EnvShimProcID+"="+strconv.Itoa(podcontract.ShimProcID), cpuaffinity.InitialLcoreEnv(cpu))
	return env, cpu, note
}

// agentCPU picks the agent's CPU among the F-Stack processes' (their EAL -c masks, or
// --lcores=<lcore>@<CPU> when lcores share CPUs): the last
// process's first, process 0's last, none above podcontract.MaxShimLcore if it can (ok false
// otherwise).
func agentCPU(res *render.Result) (int, bool) {
	var cpus []int
	for k := len(res.EAL) - 1; k >= 0; k-- {
		for _, a := range res.EAL[k] {
			if c, ok, err := render.EALCPU(a); ok && err == nil {
				cpus = append(cpus, c)
			}
		}
	}
	for _, c := range cpus {
		if c <= podcontract.MaxShimLcore {
			return c, true
		}
	}
	if len(cpus) == 0 {
		return 0, false
	}
	return cpus[0], false
}

// serveAppProbe answers /app-probe/<container>/<kind>: 200 when the original probe passes
// through F-Stack, 503 with the reason otherwise. Before the dataplane is ready it fails, so a
// startup probe keeps waiting. Only the node is answered (node.go): each call makes the app
// accept a connection through F-Stack. Callers of a path at the same time share one probe: one
// started a moment before a caller asked answers it too, as a kubelet probe period is seconds.
func (s *Supervisor) serveAppProbe(w http.ResponseWriter, r *http.Request) {
	if !s.fromNode(r.RemoteAddr) {
		http.Error(w, "app probes are answered to the node only (the kubelet probes from the node's address or the pod's default gateway)", http.StatusForbidden)
		return
	}
	probe, ok := s.app.probes[r.URL.Path]
	switch {
	case s.app.err != nil:
		http.Error(w, s.app.err.Error(), http.StatusServiceUnavailable)
		return
	case !ok:
		http.Error(w, "no app probe at "+r.URL.Path, http.StatusNotFound)
		return
	case !s.health.ready.Load():
		http.Error(w, "the F-Stack dataplane is not ready: "+s.health.text(), http.StatusServiceUnavailable)
		return
	}
	v, _, _ := s.app.flight.Do(r.URL.Path, func() (any, error) { return s.appProbe(r.URL.Path, probe), nil })
	res := v.(probeResult)
	if !res.passed {
		http.Error(w, res.detail, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte(res.detail + "\n"))
}

type probeResult struct {
	passed bool
	detail string
}

// appProbe performs the probe at path once and records its result.
func (s *Supervisor) appProbe(path string, probe podcontract.AppProbe) probeResult {
	if why := s.appBroken(path); why != "" {
		s.app.record(s, path, false, why)
		return probeResult{false, why}
	}
	a := s.app.agent.Load()
	if a == nil {
		return probeResult{false, "the probe agent is not running"}
	}
	timeout := max(time.Duration(probe.TimeoutSeconds)*time.Second-agentMargin, agentMargin)
	req := func(left time.Duration) []byte { return agentRequest(probe, appProbeAddr, left) }
	line, err := a.ask(req, s.Now().Add(timeout))
	passed, detail := judge(probe, line, err)
	s.app.record(s, path, passed, detail)
	return probeResult{passed, detail}
}

// record logs a probe's result when it changes.
func (a *appProbing) record(s *Supervisor, path string, passed bool, detail string) {
	a.mu.Lock()
	was, seen := a.failed[path]
	a.failed[path] = !passed
	a.mu.Unlock()
	if !seen || was == passed {
		s.log.Info("app probe: "+detail, "path", path, "passed", passed)
	}
}

// agentRequest is the agent's request line (and, for httpGet, the request the kubelet would
// send, user headers replacing the defaults of the same name).
func agentRequest(p podcontract.AppProbe, addr string, timeout time.Duration) []byte {
	ms := timeout.Milliseconds()
	if p.GRPC != nil {
		return []byte(fmt.Sprintf("grpc %s %d %d %d\n%s", addr, p.Port, ms, len(p.GRPC.Service), p.GRPC.Service))
	}
	if p.HTTPGet == nil {
		return []byte(fmt.Sprintf("tcp %s %d %d\n", addr, p.Port, ms))
	}
	hdr := [][2]string{{"Host", net.JoinHostPort(addr, strconv.Itoa(int(p.Port)))},
		{"User-Agent", "kube-probe/fstack"}, {"Accept", "*/*"}}
	var replaced [3]bool
	for _, h := range p.HTTPGet.Headers {
		i := slices.IndexFunc(hdr[:3], func(d [2]string) bool { return strings.EqualFold(d[0], h.Name) })
		if i >= 0 && !replaced[i] {
			hdr[i], replaced[i] = [2]string{h.Name, h.Value}, true
			continue
		}
		hdr = append(hdr, [2]string{h.Name, h.Value})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\n", p.HTTPGet.Path)
	for _, h := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	b.WriteString("Connection: close\r\n\r\n")
	return []byte(fmt.Sprintf("http %s %d %d %d\n%s", addr, p.Port, ms, b.Len(), b.String()))
}

// judge maps the agent's answer as the kubelet maps its own probe's: a connection for tcpSocket,
// a status from 200 to 399 for httpGet, SERVING for grpc.
func judge(p podcontract.AppProbe, line string, err error) (bool, string) {
	if err != nil {
		return false, err.Error()
	}
	what, rest, _ := strings.Cut(line, " ")
	switch {
	case what == "fail":
		return false, rest
	case what != "ok":
		return false, fmt.Sprintf("the probe agent answered %q", line)
	case p.GRPC != nil:
		return rest == "SERVING", fmt.Sprintf("grpc health of %q on port %d: %s", p.GRPC.Service, p.Port, rest)
	case p.HTTPGet == nil:
		return true, fmt.Sprintf("tcp port %d: connected", p.Port)
	}
	code, err := strconv.Atoi(rest)
	if err != nil {
		return false, fmt.Sprintf("the probe agent answered %q", line)
	}
	msg := fmt.Sprintf("GET %s on port %d: HTTP %d", p.HTTPGet.Path, p.Port, code)
	return code >= 200 && code < 400, msg
}
