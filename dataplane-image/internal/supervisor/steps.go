package supervisor

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// interrupted closes when stop closes or any of procs exits: a start step that waits (for the
// shim's zones, for the probe agent) must give up at once then. release ends its goroutines.
func interrupted(procs []*child, stop <-chan struct{}) (ch <-chan struct{}, release func()) {
	out, quit := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fire := func() { once.Do(func() { close(out) }) }
	watch := func(c <-chan struct{}) {
		select {
		case <-c:
			fire()
		case <-quit:
		}
	}
	go watch(stop)
	for _, c := range procs {
		go watch(c.done)
	}
	return out, func() { close(quit) }
}

// startStep polls check every timing.Poll until it passes, a process exits, a stop is asked
// for, or timing.StartTimeout passes; the error then names what was awaited and the last reason.
func startStep(what string, procs []*child, timing Timing, stop <-chan struct{}, check func() error) error {
	return pollStep("not ready", what, procs, timing, stop, check)
}

// waitUntil is startStep for one process: its timeout names the process.
func waitUntil(what string, c *child, timing Timing, stop <-chan struct{}, check func() error) error {
	return pollStep(fmt.Sprintf("process %d was not ready", c.id), what, []*child{c}, timing, stop, check)
}

// pollStep is the one polling loop of the start: subject says who was not ready on a timeout.
func pollStep(subject, what string, procs []*child, timing Timing, stop <-chan struct{}, check func() error) error {
	abort, release := interrupted(procs, stop)
	defer release()
	deadline := time.NewTimer(timing.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(timing.Poll)
	defer tick.Stop()
	last := check()
	for last != nil {
		select {
		case <-abort:
			return stepAborted(procs)
		case <-deadline.C:
			return fmt.Errorf("%s within %s: %s: %w", subject, timing.StartTimeout, what, last)
		case <-tick.C:
			last = check()
		}
	}
	return nil
}

// stepAborted names the process that died during a start step, or says a stop came.
func stepAborted(procs []*child) error {
	for _, c := range procs {
		select {
		case <-c.done:
			return fmt.Errorf("process %d died while starting (%s)", c.id, c.status())
		default:
		}
	}
	return errStopped
}

// errStopped means a signal arrived while waiting.
var errStopped = errors.New("stopped by signal")
