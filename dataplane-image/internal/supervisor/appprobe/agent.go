package appprobe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-fstack/kube-fstack/internal/logging"
)

// Agent runs fstack-probe-agent (dataplane-image/probe-agent) and asks it one request at a
// time. The agent is a shim client: each start attaches a DPDK secondary and takes one of the
// instance's 32 contexts, which it gives back only when it exits normally. So it is started
// as part of the dataplane's start (ready waits for its attach) and killed only when it stops
// answering altogether: every wait of the agent is bounded by the timeout it was given, so a
// probe without an answer in time (a closed port: F-Stack drops the SYN, docs/fstack-rules.md
// §9) is the app's answer, not a stuck agent. Starts are bounded per generation, and running
// out of them is made loud (exhausted).
type Agent struct {
	binary    string
	env       []string
	log       *slog.Logger
	maxStarts int
	// StuckAfter is how long an agent may stay silent, its late reply and the liveness ping
	// sent after it unanswered, before it counts as stuck (a shim call spinning on a dead
	// F-Stack process) and is killed. Killing leaks its context, so it is generous.
	StuckAfter time.Duration
	metrics    *agentMetrics
	// exhausted is called once when the starts of this generation run out.
	exhausted func(msg string)

	turn    chan struct{} // one request at a time
	mu      sync.Mutex
	cur     *agentProc
	starts  int
	toldOut bool // the exhausted starts were reported
	closed  bool
}

type agentProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string // every reply line, in order; closed when the agent's fd 3 closes
	done  chan struct{}
	ready bool // its "ready" line was read
	// owed counts lines still to come for requests already sent (a late reply and the ping
	// sent after it); late is when the oldest of them became late.
	owed int
	late time.Time
}

// replySlack is how long past a request's deadline its reply may take to arrive (the agent
// starts its clock on reading the request); it is half of agentMargin, which the kubelet's
// own timeout leaves for the answer.
const replySlack = agentMargin / 2

// AgentName is the probe agent as logging.KeyProgram names it.
const AgentName = "fstack-probe-agent"

func newAgent(binary string, env []string, log *slog.Logger) *Agent {
	return &Agent{binary: binary, env: env, log: log.With(logging.KeyProgram, AgentName), maxStarts: 5, StuckAfter: 10 * time.Second,
		metrics: newAgentMetrics(), exhausted: func(string) {}, turn: make(chan struct{}, 1)}
}

// ask sends the request req builds for the time left until deadline and returns the agent's
// reply line. It waits for its turn, for an agent that has attached and for the answers an
// earlier late probe still owes, all within deadline.
func (a *Agent) ask(req func(timeout time.Duration) []byte, deadline time.Time) (string, error) {
	select {
	case a.turn <- struct{}{}:
		defer func() { <-a.turn }()
	case <-time.After(time.Until(deadline)):
		return "", errors.New("timed out waiting for an earlier probe to finish")
	}
	p, err := a.running(context.Background(), deadline)
	if err != nil {
		return "", err
	}
	if err := a.settle(p, deadline); err != nil {
		return "", err
	}
	left := time.Until(deadline)
	if left <= 0 {
		return "", errors.New("no time left for the probe after waiting for the probe agent")
	}
	if _, err := p.in.Write(req(left)); err != nil {
		a.reap(p)
		return "", fmt.Errorf("the probe agent is gone: %w", err)
	}
	select {
	case line, ok := <-p.lines:
		if !ok {
			a.reap(p)
			return "", errors.New("the probe agent exited without answering (its log says why)")
		}
		return line, nil
	case <-time.After(left + replySlack):
		// Not killed: it bounds its own waits by the timeout it was given, so it answers soon.
		// The ping after it tells, at the next probe, whether it still answers at all.
		p.owed, p.late = 1, time.Now()
		if _, err := p.in.Write([]byte("ping\n")); err == nil {
			p.owed++
		}
		return "", errors.New("no answer from the probe agent within the probe's timeout")
	}
}

// settle reads the lines an earlier late probe still owes. An agent that has answered
// neither its late reply nor the liveness ping after it for stuckAfter is stuck and killed.
func (a *Agent) settle(p *agentProc, deadline time.Time) error {
	for p.owed > 0 {
		select {
		case _, ok := <-p.lines:
			if !ok {
				a.reap(p)
				return errors.New("the probe agent exited without answering (its log says why)")
			}
			p.owed--
		case <-time.After(time.Until(deadline)):
			if silent := time.Since(p.late); silent > a.StuckAfter {
				a.log.Warn("probe agent has answered neither a late probe nor its liveness ping: killing it (a shim call may be stuck on a dead F-Stack process; its shim context is lost)", logging.KeyPID, p.cmd.Process.Pid, "silent", silent.Round(time.Second).String())
				a.metrics.kills.Inc()
				a.kill(p)
				return errors.New("the probe agent stopped answering, even its liveness ping, and was killed; the next probe starts another")
			}
			return errors.New("the probe agent is still finishing an earlier probe that got no answer in time")
		}
	}
	p.late = time.Time{}
	return nil
}

// running returns the live agent, starting one (and waiting for its attach) if needed. The
// end of ctx ends the wait early.
func (a *Agent) running(ctx context.Context, deadline time.Time) (*agentProc, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errors.New("the dataplane is stopping")
	}
	if a.cur == nil || !a.cur.alive() {
		if a.starts >= a.maxStarts {
			return nil, a.outOfStarts()
		}
		a.starts++
		a.metrics.starts.Inc()
		p, err := a.start()
		if err != nil {
			return nil, err
		}
		a.cur = p
	}
	return a.cur, a.awaitReady(ctx, a.cur, deadline)
}

// outOfStarts says, once loudly, that this generation's agent starts are used up: every app
// probe fails from now on, and only a dataplane restart (fresh zones, a fresh budget) helps.
func (a *Agent) outOfStarts() error {
	msg := fmt.Sprintf("the probe agent was started %d times in this generation and did not keep running, so every app probe fails; each start that did not end cleanly leaked a shim context: the dataplane must restart (see this container's log)", a.starts)
	if !a.toldOut {
		a.toldOut = true
		a.log.Error(msg)
		a.metrics.exhausted.Set(1)
		a.exhausted(msg)
	}
	return errors.New(msg)
}

// awaitReady reads the agent's first line, which comes once the shim has attached (the agent
// opens one socket at start), then checks its request loop with a ping.
func (a *Agent) awaitReady(ctx context.Context, p *agentProc, deadline time.Time) error {
	if p.ready {
		return nil
	}
	line, err := p.next(ctx, deadline)
	if err != nil {
		if !errors.Is(err, errTimedOut) && ctx.Err() == nil {
			a.reap(p)
		}
		return fmt.Errorf("%w waiting for the probe agent to attach to F-Stack", err)
	}
	if !strings.HasPrefix(line, "ready ") {
		a.reap(p)
		return fmt.Errorf("the probe agent did not start (first line %q); see this container's log", line)
	}
	if _, err := p.in.Write([]byte("ping\n")); err != nil {
		a.reap(p)
		return fmt.Errorf("the probe agent is gone: %w", err)
	}
	pong, err := p.next(ctx, deadline)
	if err == nil && pong != "pong" {
		err = fmt.Errorf("it answered %q", pong)
	}
	if err != nil {
		a.reap(p)
		return fmt.Errorf("the probe agent attached but did not answer its first ping: %w", err)
	}
	p.ready = true
	a.log.Info("probe agent started", logging.KeyPID, p.cmd.Process.Pid, "sockets", strings.TrimPrefix(line, "ready "))
	if line != "ready fstack" {
		a.log.Warn("the probe agent's sockets are not F-Stack's (the shim did not attach, or this image's shim is a stand-in): it reaches only kernel listeners", logging.KeyPID, p.cmd.Process.Pid)
	}
	return nil
}

var (
	errTimedOut    = errors.New("timed out")
	errAgentExited = errors.New("the probe agent exited")
)

// next reads the agent's next line within deadline, or until ctx ends (its cause then).
func (p *agentProc) next(ctx context.Context, deadline time.Time) (string, error) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			return "", errAgentExited
		}
		return line, nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	case <-time.After(time.Until(deadline)):
		return "", errTimedOut
	}
}

func (a *Agent) start() (*agentProc, error) {
	repR, repW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		repR.Close()
		repW.Close()
		return nil, err
	}
	cmd := exec.Command(a.binary)
	cmd.Env = a.env
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = []*os.File{repW} // fd 3: replies; the shim logs on stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	repW.Close()
	outW.Close()
	if err != nil {
		repR.Close()
		outR.Close()
		return nil, fmt.Errorf("start the probe agent %s: %w", a.binary, err)
	}
	p := &agentProc{cmd: cmd, in: in, lines: make(chan string, 4), done: make(chan struct{})}
	log := a.log.With(logging.KeyStream, "output", logging.KeyPID, cmd.Process.Pid)
	go func() {
		s := bufio.NewScanner(outR)
		for s.Scan() {
			if strings.TrimSpace(s.Text()) != "" {
				log.Info(s.Text())
			}
		}
		outR.Close()
	}()
	go func() {
		s := bufio.NewScanner(repR)
		for s.Scan() {
			p.lines <- s.Text()
		}
		close(p.lines)
		repR.Close()
	}()
	go func() {
		err := cmd.Wait()
		a.log.Info("probe agent exited", logging.KeyPID, cmd.Process.Pid, "status", exitText(err))
		close(p.done)
	}()
	return p, nil
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// PID is the running agent's process id, 0 when none runs.
func (a *Agent) PID() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == nil || !a.cur.alive() {
		return 0
	}
	return a.cur.cmd.Process.Pid
}

func (p *agentProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// reap waits for an agent that closed its reply fd to exit, so the next request starts another.
func (a *Agent) reap(p *agentProc) {
	select {
	case <-p.done:
	case <-time.After(time.Second):
		a.kill(p)
	}
}

// kill ends the agent's process group (it has its own), whatever it started included.
func (a *Agent) kill(p *agentProc) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop ends the agent before F-Stack stops: closing its stdin makes it exit normally, which
// gives its shim context back; one that does not within grace is killed.
func (a *Agent) stop(grace time.Duration) {
	a.mu.Lock()
	a.closed = true
	p := a.cur
	a.mu.Unlock()
	if p == nil || !p.alive() {
		return
	}
	p.in.Close()
	select {
	case <-p.done:
	case <-time.After(grace):
		a.kill(p)
	}
}

// agentMetrics make the agent's starts and kills visible: each start that does not end cleanly
// leaks a shim context, and a generation whose starts ran out performs no app probe.
type agentMetrics struct {
	starts, kills prometheus.Counter
	exhausted     prometheus.Gauge
}

func newAgentMetrics() *agentMetrics {
	return &agentMetrics{
		starts: prometheus.NewCounter(prometheus.CounterOpts{Name: "fstack_probe_agent_starts_total",
			Help: "Starts of the probe agent (each takes a shim context, which only a clean exit gives back)."}),
		kills: prometheus.NewCounter(prometheus.CounterOpts{Name: "fstack_probe_agent_kills_total",
			Help: "Probe agents killed because they stopped answering, even their liveness ping (each leaks a shim context)."}),
		exhausted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fstack_probe_agent_starts_exhausted",
			Help: "1 when this generation's probe agent starts ran out: every app probe fails until the dataplane restarts."}),
	}
}

func (m *agentMetrics) register(reg prometheus.Registerer) {
	reg.MustRegister(m.starts, m.kills, m.exhausted)
}

// startsLeft says whether another start is allowed in this generation.
func (a *Agent) startsLeft() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.starts < a.maxStarts
}
