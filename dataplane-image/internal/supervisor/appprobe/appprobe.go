// Package appprobe performs the pod's app probes through F-Stack: the injector rewrote the app
// containers' probes to the supervisor's /app-probe/<container>/<kind> (podcontract.EnvAppProbes),
// and a Prober answers them by asking the probe agent (fstack-probe-agent, a shim client) to
// perform the original probe against the app on F-Stack's loopback. The supervisor starts the
// agent as the last step of a generation's start and stops it first at its end; what the
// supervisor knows (is the dataplane ready, who is the node) comes in through Config.
package appprobe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/cpuaffinity"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// Addr is where the agent reaches the app: F-Stack's loopback. It answers whatever
// address the app's listener is bound to as long as that is the wildcard (Nginx's `listen 80`),
// without knowing which F-Stack port or address the spec gave it. With FF_LOOPBACK_SUPPORT a
// shim client reaches the app there (docs/fstack-rules.md §5).
const Addr = "127.0.0.1"

// agentMargin is kept from a probe's timeout for the answer to reach the kubelet.
const agentMargin = 100 * time.Millisecond

// Config is what a Prober is told by the supervisor.
type Config struct {
	// Probes is podcontract.EnvAppProbes.
	Probes string
	// AppStateDir is the app-state volume, where the launchers mark their apps broken.
	AppStateDir string
	Log         *slog.Logger
	// Registry gets the agent's metrics at the first start.
	Registry prometheus.Registerer
	Now      func() time.Time
	// FromNode says whether a caller's address (host:port) is the node's: only the node is
	// answered, as each call makes the app accept a connection through F-Stack.
	FromNode func(remote string) bool
	// Ready says whether the dataplane is ready and, when it is not, why.
	Ready func() (bool, string)
	// OutOfStarts is told once per generation that the agent's starts ran out.
	OutOfStarts func(msg string)
}

// Prober serves the pod's rewritten app probes (podcontract.EnvAppProbes), across generations.
type Prober struct {
	cfg    Config
	probes podcontract.AppProbes
	err    error // EnvAppProbes could not be read: every probe fails with it
	agent  atomic.Pointer[Agent]
	mu     sync.Mutex
	failed map[string]bool // last result per path, to log changes only
	// flight shares one probe among the callers of the same path: the agent performs one
	// request at a time, so without it a burst of callers queued ahead of the kubelet's probe
	// until that timed out (and the kubelet restarted the app).
	flight singleflight.Group
	// metrics are the agents' counters, kept across generations.
	metrics     *agentMetrics
	metricsOnce sync.Once
}

// New reads cfg.Probes; a Probes that cannot be read fails every probe, saying why.
func New(cfg Config) *Prober {
	probes, err := podcontract.ParseAppProbes(cfg.Probes)
	return &Prober{cfg: cfg, probes: probes, err: err, failed: map[string]bool{}}
}

// Count is how many app probes the pod has.
func (p *Prober) Count() int { return len(p.probes) }

// Err is why the pod's app probes cannot be read, nil when they can.
func (p *Prober) Err() error { return p.err }

// Agent is the current generation's agent, nil between generations.
func (p *Prober) Agent() *Agent { return p.agent.Load() }

// Start is the start's last step when the pod has app probes: the agent (binary, with env) is
// started and has attached to F-Stack (and answered a ping) within the given time before the
// dataplane reports ready, so the app's first probes are performed, not refused. The end of ctx
// (the generation's) ends the wait, its cause returned.
func (p *Prober) Start(ctx context.Context, binary string, env []string, within time.Duration) error {
	a := newAgent(binary, env, p.cfg.Log)
	p.metricsOnce.Do(func() {
		p.metrics = a.metrics
		if p.cfg.Registry != nil {
			p.metrics.register(p.cfg.Registry)
		}
	})
	a.metrics, a.exhausted = p.metrics, p.outOfStarts
	a.metrics.exhausted.Set(0)
	p.agent.Store(a)
	_, err := a.running(ctx, p.cfg.Now().Add(within))
	for err != nil && ctx.Err() == nil && !errors.Is(err, errTimedOut) && a.startsLeft() {
		p.cfg.Log.Warn("probe agent: starting another", logging.KeyProgram, AgentName, logging.KeyErr, err)
		_, err = a.running(ctx, p.cfg.Now().Add(within))
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil {
		return fmt.Errorf("not ready within %s: the probe agent attaching to F-Stack: %w", within, err)
	}
	return nil
}

func (p *Prober) outOfStarts(msg string) {
	if p.cfg.OutOfStarts != nil {
		p.cfg.OutOfStarts(msg)
	}
}

// Stop ends the generation's agent, giving its shim context back (grace
// podcontract.ProbeAgentStopGrace).
func (p *Prober) Stop() {
	if a := p.agent.Swap(nil); a != nil {
		a.stop(podcontract.ProbeAgentStopGrace)
	}
}

// Env is the agent's environment: base (the supervisor's children's) with the shim as an app
// gets it, lib preloaded when the image has it (have), and FF_INITIAL_LCORE_ID on the CPU of the
// last F-Stack process; it also returns that CPU and a note for the log. The agent must run on a
// CPU of this container (EAL pins it there; a CPU outside the cpuset makes the shim fall back to
// kernel sockets), and every one is an F-Stack process's lcore. A shim client shares no
// per-lcore state with that process (it only uses rte_malloc, whose heap is locked, and the
// context's spinlock), so the same lcore id is safe; but it busy-waits for each answer, so it
// stays off process 0's CPU when there is another: process 0 answers it (FF_PROC_ID 0), and a
// client spinning on that CPU would delay its own answer and the primary's traffic. The shim
// ignores an FF_INITIAL_LCORE_ID above lcore 50 (INITIAL_LCORE_ID_MAX), so a CPU up to 50 is
// preferred.
func Env(base []string, lib, mode string, have bool, res *render.Result) ([]string, int, string) {
	env := base
	note := "shim " + mode
	if have {
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

// ServeHTTP answers /app-probe/<container>/<kind>: 200 when the original probe passes
// through F-Stack, 503 with the reason otherwise. Before the dataplane is ready it fails, so a
// startup probe keeps waiting. Only the node is answered (Config.FromNode): each call makes the
// app accept a connection through F-Stack. Callers of a path at the same time share one probe:
// one started a moment before a caller asked answers it too, as a kubelet probe period is
// seconds.
func (p *Prober) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.cfg.FromNode(r.RemoteAddr) {
		http.Error(w, "app probes are answered to the node only (the kubelet probes from the node's address or the pod's default gateway)", http.StatusForbidden)
		return
	}
	probe, ok := p.probes[r.URL.Path]
	ready, state := p.cfg.Ready()
	switch {
	case p.err != nil:
		http.Error(w, p.err.Error(), http.StatusServiceUnavailable)
		return
	case !ok:
		http.Error(w, "no app probe at "+r.URL.Path, http.StatusNotFound)
		return
	case !ready:
		http.Error(w, "the F-Stack dataplane is not ready: "+state, http.StatusServiceUnavailable)
		return
	}
	v, _, _ := p.flight.Do(r.URL.Path, func() (any, error) { return p.probe(r.URL.Path, probe), nil })
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

// probe performs the probe at path once and records its result.
func (p *Prober) probe(path string, probe podcontract.AppProbe) probeResult {
	if why := Broken(p.cfg.AppStateDir, path); why != "" {
		p.record(path, false, why)
		return probeResult{false, why}
	}
	a := p.agent.Load()
	if a == nil {
		return probeResult{false, "the probe agent is not running"}
	}
	timeout := max(time.Duration(probe.TimeoutSeconds)*time.Second-agentMargin, agentMargin)
	req := func(left time.Duration) []byte { return agentRequest(probe, Addr, left) }
	line, err := a.ask(req, p.cfg.Now().Add(timeout))
	passed, detail := judge(probe, line, err)
	p.record(path, passed, detail)
	return probeResult{passed, detail}
}

// record logs a probe's result when it changes.
func (p *Prober) record(path string, passed bool, detail string) {
	p.mu.Lock()
	was, seen := p.failed[path]
	p.failed[path] = !passed
	p.mu.Unlock()
	if !seen || was == passed {
		p.cfg.Log.Info("app probe: "+detail, "path", path, "passed", passed)
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
