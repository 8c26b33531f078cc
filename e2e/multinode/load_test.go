package multinode

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// load is a client of the data network that pings, every 200 ms, each endpoint the Service's
// slices list as ready at that moment, as kube-proxy would send new connections to it. The
// stand-in answers ping only: this proves the endpoints' timing against the dataplanes'
// lifetimes across nodes; TCP through a load generator is checked by hand on real F-Stack.
type load struct {
	mu             sync.Mutex
	sent, failed   int
	empty          int
	failures       []string
	stop, finished chan struct{}
}

func (e *cluster) startLoad(t *testing.T) *load {
	t.Helper()
	l := &load{stop: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(l.finished)
		for {
			select {
			case <-l.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			eps, err := e.endpointsNoFail()
			if err != nil {
				continue
			}
			ready := 0
			for _, x := range eps {
				if !x.ready {
					continue
				}
				ready++
				ok := ping(x.addr)
				l.mu.Lock()
				l.sent++
				if !ok {
					l.failed++
					l.failures = append(l.failures, fmt.Sprintf("%s (%s on %s) at %s", x.addr, x.pod, x.node, time.Now().Format("15:04:05.000")))
				}
				l.mu.Unlock()
			}
			if ready == 0 {
				l.mu.Lock()
				l.empty++
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// finish stops the load and fails the test on any unanswered ping or any moment without a ready
// endpoint.
func (l *load) finish(t *testing.T, what string) {
	t.Helper()
	close(l.stop)
	<-l.finished
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%s: %d pings to ready endpoints, %d unanswered, %d moments with none ready", what, l.sent, l.failed, l.empty)
	if l.sent < 20 {
		t.Errorf("%s: only %d pings sent: the load did not run", what, l.sent)
	}
	if l.failed > 0 {
		t.Errorf("%s: %d of %d pings to ready endpoints unanswered: %v", what, l.failed, l.sent, l.failures)
	}
	if l.empty > 0 {
		t.Errorf("%s: %d moments with no ready endpoint", what, l.empty)
	}
}
