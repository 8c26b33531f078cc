package supervisor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// child is one running F-Stack process.
type child struct {
	id    int
	cmd   *exec.Cmd
	stdin *os.File // held open: testpmd, like any program reading stdin, must not see EOF
	done  chan struct{}
	state *os.ProcessState
	err   error
	logs  sync.WaitGroup
}

// relayLines logs each line a child writes as the message of one line of the supervisor's log,
// with attrs saying whose it is and logging.KeyStream marking it as the child's own words.
func relayLines(log *slog.Logger, r io.Reader, attrs ...any) {
	log = log.With(append([]any{logging.KeyStream, "output"}, attrs...)...)
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		// A blank line says nothing, and a record with no message is noise to every reader.
		if strings.TrimSpace(s.Text()) != "" {
			log.Info(s.Text())
		}
	}
}

// startChild starts argv as process id; once it has exited and its output has been logged,
// each line to log (which says whose output it is) with the child's pid, it ends the
// generation with a processExit (end: the generation's cancel).
func startChild(id int, argv, env []string, log *slog.Logger, end context.CancelCauseFunc) (*child, error) {
	c := &child{id: id, done: make(chan struct{})}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Env = env
	// Its own process group keeps a terminal's Ctrl-C away from it (the supervisor forwards
	// signals in order); Pdeathsig takes it down if the supervisor itself is killed.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.cmd.Stdin, c.stdin = stdinR, stdinW
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	c.cmd.Stdout, c.cmd.Stderr = outW, outW
	if err := c.cmd.Start(); err != nil {
		for _, f := range []*os.File{stdinR, stdinW, outR, outW} {
			f.Close()
		}
		return nil, &cannotExec{fmt.Errorf("start process %d (%s): %w", id, argv[0], err)}
	}
	stdinR.Close()
	outW.Close()
	c.logs.Add(1)
	pid := c.cmd.Process.Pid
	go func() {
		defer c.logs.Done()
		relayLines(log, outR, logging.KeyPID, pid)
		outR.Close()
	}()
	go c.wait(end)
	return c, nil
}

// cannotExec is a process that could not be started at all (a missing or non-executable
// binary): a new generation would meet it again.
type cannotExec struct{ err error }

func (e *cannotExec) Error() string { return e.err.Error() }
func (e *cannotExec) Unwrap() error { return e.err }

func (c *child) wait(end context.CancelCauseFunc) {
	c.err = c.cmd.Wait()
	c.state = c.cmd.ProcessState
	c.logs.Wait()
	c.stdin.Close()
	close(c.done)
	end(&processExit{c})
}

// processExit is the cause of a generation ended by one of its processes exiting (the first to
// exit: a cause is set once).
type processExit struct{ c *child }

func (e *processExit) Error() string {
	return fmt.Sprintf("F-Stack process %d (%s) exited: %s", e.c.id, render.ProcType(e.c.id), e.c.status())
}

func (c *child) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// status says how it ended, for the exit message.
func (c *child) status() string {
	if c.state == nil {
		return "still running"
	}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", c.state.ExitCode())
}

func (c *child) signal(sig syscall.Signal) {
	if c.alive() {
		_ = c.cmd.Process.Signal(sig)
	}
}

// stopAll sends SIGTERM to the children in the given order, each waited for until deadline,
// then SIGKILLs whatever is left. Secondaries go first: a primary that leaves first strands them.
func stopAll(order []*child, grace time.Duration) {
	deadline := time.Now().Add(grace)
	for _, c := range order {
		c.signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(time.Until(deadline)):
		}
	}
	for _, c := range order {
		if c.alive() {
			c.signal(syscall.SIGKILL)
			<-c.done
		}
	}
}
