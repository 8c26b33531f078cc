package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// probeAgent runs fstack-probe-agent (dataplane-image/probe-agent) and asks it one request at a
// time. The agent is a shim client: each start attaches a DPDK secondary (about 0.1 s) and takes
// one of the instance's 32 contexts, which it gives back only when it exits normally, so it is
// started once per generation and restarted only when it died or stopped answering, a bounded
// number of times.
type probeAgent struct {
	binary    string
	env       []string
	log       *lineLog
	maxStarts int
	// stuckAfter is how long past a request's own timeout the agent may stay silent before it
	// counts as stuck (a shim call spinning on a dead F-Stack process) and is killed.
	stuckAfter time.Duration

	turn   chan struct{} // one request at a time
	mu     sync.Mutex
	cur    *agentProc
	starts int
	closed bool
}

type agentProc struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	replies chan string // closed when the agent's fd 3 closes
	done    chan struct{}
	ready   bool // its "ready" line was read
}

func newProbeAgent(binary string, env []string, log *lineLog) *probeAgent {
	return &probeAgent{binary: binary, env: env, log: log, maxStarts: 5, stuckAfter: 2 * time.Second,
		turn: make(chan struct{}, 1)}
}

func (a *probeAgent) logf(format string, args ...any) {
	a.log.printf("[supervisor] probe agent: "+format+"\n", args...)
}

// ask sends req and returns the agent's reply line. It waits for its turn and for the reply
// until deadline (plus stuckAfter for the reply, after which the agent is killed).
func (a *probeAgent) ask(req []byte, deadline time.Time) (string, error) {
	select {
	case a.turn <- struct{}{}:
		defer func() { <-a.turn }()
	case <-time.After(time.Until(deadline)):
		return "", errors.New("timed out waiting for an earlier probe to finish")
	}
	p, err := a.running(deadline)
	if err != nil {
		return "", err
	}
	if _, err := p.in.Write(req); err != nil {
		a.reap(p)
		return "", fmt.Errorf("the probe agent is gone: %w", err)
	}
	select {
	case line, ok := <-p.replies:
		if !ok {
			a.reap(p)
			return "", errors.New("the probe agent exited without answering (its log says why)")
		}
		return line, nil
	case <-time.After(time.Until(deadline) + a.stuckAfter):
		a.logf("no answer %s past the probe's timeout: killing it (a shim call may be stuck on a dead F-Stack process)", a.stuckAfter)
		a.kill(p)
		return "", errors.New("the probe agent stopped answering and was killed; the next probe starts another")
	}
}

// running returns the live agent, starting one (and waiting for its "ready" line) if needed.
func (a *probeAgent) running(deadline time.Time) (*agentProc, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errors.New("the dataplane is stopping")
	}
	if a.cur == nil || !a.cur.alive() {
		if a.starts >= a.maxStarts {
			return nil, fmt.Errorf("the probe agent was started %d times in this generation and did not keep running; see this container's log", a.starts)
		}
		a.starts++
		p, err := a.start()
		if err != nil {
			return nil, err
		}
		a.cur = p
	}
	return a.cur, a.awaitReady(a.cur, deadline)
}

// awaitReady reads the agent's first line: it comes once the shim has attached (the agent opens
// one socket at start), which a probe with a short timeout may not wait for; the next one does.
func (a *probeAgent) awaitReady(p *agentProc, deadline time.Time) error {
	if p.ready {
		return nil
	}
	select {
	case line, ok := <-p.replies:
		if !ok || !strings.HasPrefix(line, "ready ") {
			a.reap(p)
			return fmt.Errorf("the probe agent did not start (first line %q); see this container's log", line)
		}
		p.ready = true
		a.logf("started (pid %d), its sockets are %s sockets", p.cmd.Process.Pid, strings.TrimPrefix(line, "ready "))
		if line != "ready fstack" {
			a.logf("WARNING: its sockets are not F-Stack's (the shim did not attach, or this image's shim is a stand-in): it reaches only kernel listeners")
		}
		return nil
	case <-time.After(time.Until(deadline)):
		return errors.New("timed out waiting for the probe agent to attach to F-Stack")
	}
}

func (a *probeAgent) start() (*agentProc, error) {
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
	p := &agentProc{cmd: cmd, in: in, replies: make(chan string, 1), done: make(chan struct{})}
	go func() {
		s := bufio.NewScanner(outR)
		for s.Scan() {
			a.log.printf("[probe-agent] %s\n", s.Text())
		}
		outR.Close()
	}()
	go func() {
		s := bufio.NewScanner(repR)
		for s.Scan() {
			p.replies <- s.Text()
		}
		close(p.replies)
		repR.Close()
	}()
	go func() {
		err := cmd.Wait()
		a.logf("pid %d exited: %v", cmd.Process.Pid, exitText(err))
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

func (p *agentProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// reap waits for an agent that closed its reply fd to exit, so the next request starts another.
func (a *probeAgent) reap(p *agentProc) {
	select {
	case <-p.done:
	case <-time.After(time.Second):
		a.kill(p)
	}
}

// kill ends the agent's process group (it has its own), whatever it started included.
func (a *probeAgent) kill(p *agentProc) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop ends the agent before F-Stack stops: closing its stdin makes it exit normally, which
// gives its shim context back; one that does not within grace is killed.
func (a *probeAgent) stop(grace time.Duration) {
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
