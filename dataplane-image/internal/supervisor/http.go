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
	started atomic.Bool // shim files (the launcher) placed
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
	mux.HandleFunc(podcontract.ReadyzPath, func(w http.ResponseWriter, r *http.Request) {
		if !probeWait(r, s.health.ready.Load) {
			http.Error(w, "not ready: "+s.health.text(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc(podcontract.StartedzPath, func(w http.ResponseWriter, r *http.Request) {
		if !probeWait(r, s.health.started.Load) {
			http.Error(w, "not started: "+s.health.text(), http.StatusServiceUnavailable)
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
	mux.HandleFunc(podcontract.AppProbePrefix, s.serveAppProbe)
	mux.Handle(podcontract.MetricsPath, promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	return mux
}

// maxProbeWait bounds ?wait=, so a caller cannot park handlers for long.
const maxProbeWait = 5 * time.Second

// probeWait reports cond, first waiting for it up to the request's ?wait= duration (a long
// poll: the kubelet's probe gets its answer the moment the state changes, not a period later).
func probeWait(r *http.Request, cond func() bool) bool {
	if cond() {
		return true
	}
	d, err := time.ParseDuration(r.URL.Query().Get("wait"))
	if err != nil || d <= 0 {
		return false
	}
	d = min(d, maxProbeWait)
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return cond()
		case <-t.C:
			return cond()
		case <-tick.C:
			if cond() {
				return true
			}
		}
	}
}

// Serve answers the probes and metrics on l until the supervisor returns.
func (s *Supervisor) Serve(l net.Listener) error {
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second}
	return srv.Serve(l)
}
