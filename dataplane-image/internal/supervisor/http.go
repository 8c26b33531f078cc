package supervisor

import (
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// health is what the probes read.
type health struct {
	ready   atomic.Bool // every process up, shim placed
	failed  atomic.Bool // a process died
	message atomic.Value
}

func (h *health) set(msg string) { h.message.Store(msg) }

func (h *health) text() string {
	if s, ok := h.message.Load().(string); ok {
		return s
	}
	return ""
}

func (s *Supervisor) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(podcontract.ReadyzPath, func(w http.ResponseWriter, _ *http.Request) {
		if !s.health.ready.Load() {
			http.Error(w, "not ready: "+s.health.text(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc(podcontract.HealthzPath, func(w http.ResponseWriter, _ *http.Request) {
		if s.health.failed.Load() {
			http.Error(w, "unhealthy: "+s.health.text(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle(podcontract.MetricsPath, promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	return mux
}

// Serve answers the probes and metrics on l until the supervisor returns.
func (s *Supervisor) Serve(l net.Listener) error {
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second}
	return srv.Serve(l)
}
