package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/native"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// generation is one run of F-Stack's processes, from its config.ini to its last process stopped.
// Its context ends at the first of: the supervisor's stop (Run's context), a process's exit
// (processExit), a worker of F-Stack's Nginx gone, an app's restart request
// (ErrRestartRequested) or a port down too long (ErrPortDown); context.Cause says which. Every
// wait of the start gives up at once then, and watch turns the cause into Run's answer.
type generation struct {
	s    *Supervisor
	ctx  context.Context
	end  context.CancelCauseFunc
	stop context.Context // Run's context: done when the supervisor is to stop

	begin time.Time
	// spec is the checked spec the generation rendered (its defaulted form: read it, never
	// change it), res what it rendered.
	spec   *fsv1.StackInstanceSpec
	res    *render.Result
	prefix string // the DPDK file prefix
	gen    int
	procs  []*child
	nginx  *native.Master // F-Stack's Nginx (spec.program mode Nginx), else nil
	// started is set once the start reaches the processes: a failure from there on is a failed
	// start (startError), whatever was started is stopped, and liveness fails.
	started  bool
	contexts *contextWatch
	links    *linkWatch
}

func (s *Supervisor) newGeneration(stop context.Context) *generation {
	ctx, end := context.WithCancelCause(stop)
	return &generation{s: s, ctx: ctx, end: end, stop: stop, begin: s.Now()}
}

// stopped says the supervisor was told to stop (not that a process or a watch ended the
// generation).
func (g *generation) stopped() bool { return g.stop.Err() != nil }

// close ends what watched the generation, once its processes are stopped.
func (g *generation) close() {
	g.links.Stop()
	g.contexts.Stop()
	g.end(context.Canceled)
}

// step is one step of a generation's start, in Run's order.
type step func() error

// run runs steps in order until one fails.
func (g *generation) run(steps ...step) error {
	for _, st := range steps {
		if err := st(); err != nil {
			return err
		}
	}
	return nil
}

// startStep polls check every timing.Poll until it passes, the generation ends (a process
// exits, a stop) or timing.StartTimeout passes; the error then names what was awaited and the
// last reason.
func startStep(ctx context.Context, what string, timing Timing, check func() error) error {
	return pollStep(ctx, "not ready", what, timing, check)
}

// waitUntil is startStep for one process: its timeout names the process.
func waitUntil(ctx context.Context, what string, c *child, timing Timing, check func() error) error {
	return pollStep(ctx, fmt.Sprintf("process %d was not ready", c.id), what, timing, check)
}

// pollStep is the one polling loop of the start: subject says who was not ready on a timeout.
func pollStep(ctx context.Context, subject, what string, timing Timing, check func() error) error {
	deadline := time.NewTimer(timing.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(timing.Poll)
	defer tick.Stop()
	last := check()
	for last != nil {
		select {
		case <-ctx.Done():
			return stepAborted(ctx)
		case <-deadline.C:
			return fmt.Errorf("%s within %s: %s: %w", subject, timing.StartTimeout, what, last)
		case <-tick.C:
			last = check()
		}
	}
	return nil
}

// stepAborted says why the generation ended during a start step: the process that died while
// starting, else the cause itself (a stop: context.Canceled or the signal).
func stepAborted(ctx context.Context) error {
	cause := context.Cause(ctx)
	var exit *processExit
	if errors.As(cause, &exit) {
		return fmt.Errorf("process %d died while starting (%s)", exit.c.id, exit.c.status())
	}
	return cause
}
