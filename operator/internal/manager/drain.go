package manager

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Drain is how a replica leaves without refusing a pod. The API server keeps its connections to
// a webhook alive and sends the next review on whichever it holds, wherever its Service's
// endpoints now point (HTTP/1.1 to a service reference: its client offers nothing else there),
// and it does not retry a review the connection lost. Go's server, told to stop, closes every
// idle connection at once, which is a reset for a review already on its way on one of them.
//
// So a replica told to stop first drains for a while: its readiness fails, it still accepts new
// connections (a proxy may send one before it learns the endpoint is gone) and answers every
// review, each answer ending its connection the way the protocol lets a server do it without a
// race: HTTP/1.1 "Connection: close", which the client reads with the response and so never
// reuses the connection, and on HTTP/2 the same header, which Go's server turns into a GOAWAY
// that names the last stream it serves (any later stream is retried elsewhere by the client).
// The API server's next review then dials, and reaches a replica that stays. Only after the
// delay does the server stop, with no connection left that carried traffic during the drain.
//
// Until then connections are reused: a response per pod, not a TLS handshake per pod.
type Drain struct{ draining atomic.Bool }

// Start begins the drain; it cannot be undone (the process is leaving).
func (d *Drain) Start() { d.draining.Store(true) }

// Draining says whether Start was called.
func (d *Drain) Draining() bool { return d.draining.Load() }

// drainingServer is the webhook server whose every webhook (the builder's StackInstance
// validator too: the API server may send any of them on one connection) ends its connection
// while the replica drains.
type drainingServer struct {
	webhook.Server
	drain *Drain
}

func (s drainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, s.drain.endConnections(hook))
}

// endConnections wraps a webhook so that, while the replica drains, each answer ends its
// connection.
func (d *Drain) endConnections(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.Draining() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// ready is the readiness check: a draining replica is not ready, so it leaves the Service's
// endpoints even when it was not deleted (a kubelet stopping it for any other reason).
func (d *Drain) ready(*http.Request) error {
	if d.Draining() {
		return errors.New("draining: the operator is shutting down")
	}
	return nil
}

// StopAfterDrain is the context the manager runs under: canceled with parent, or delay after
// signaled is done, the replica draining (d.Start) from that moment on. A second signal still
// ends the process at once (controller-runtime's signal handler).
func StopAfterDrain(parent, signaled context.Context, d *Drain, delay time.Duration, log logr.Logger) context.Context {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-signaled.Done():
		}
		d.Start()
		log.Info("draining: answering webhook calls, each on a connection it then ends, before stopping", "delay", delay)
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		cancel()
	}()
	return ctx
}
