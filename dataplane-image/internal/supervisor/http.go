package supervisor

import (
	"net"
	"net/http"
	"sync"
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

	// degraded withdraws readiness while a port's link is down (linkwatch.go).
	degraded
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
		if !probeWait(r, s.health.readyNow) {
			http.Error(w, "not ready: "+s.health.notReadyReason(), http.StatusServiceUnavailable)
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
	mux.Handle(podcontract.AppProbePrefix, s.app)
	// What the pod runs and why it failed: for the node and the holders of the pod's token
	// (the operator, kubectl fstack through the API server's pod proxy), not for every pod.
	mux.HandleFunc(podcontract.StatusPath, s.private(s.serveStatus))
	mux.HandleFunc(podcontract.ConfigPath, s.private(s.serveConfig))
	mux.Handle(podcontract.MetricsPath, promhttp.HandlerFor(s.metrics.Reg, promhttp.HandlerOpts{}))
	return mux
}

// private answers h to the node (fromNode: the kubelet's addresses) and to a request carrying
// the pod's status token in podcontract.StatusTokenHeader, compared in constant time; 403 to
// anyone else. Without a valid token (an older injector's pod) only the node is answered.
func (s *Supervisor) private(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !podcontract.StatusTokenMatches(s.Cfg.StatusToken, r.Header.Get(podcontract.StatusTokenHeader)) && !s.fromNode(r.RemoteAddr) {
			http.Error(w, r.URL.Path+" is "+podcontract.StatusTokenRefusal, http.StatusForbidden)
			return
		}
		h(w, r)
	}
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

// httpLimits bound what callers of :9180 can hold. Every pod can reach the port (Prometheus
// scrapes /metrics from another pod), so none of them may be able to keep the kubelet's probes
// out.
type httpLimits struct {
	// readHeader bounds a request's headers: the kubelet and Prometheus send theirs in one
	// segment, so 2 s is ample on a loaded node and frees a silent connection quickly.
	readHeader time.Duration
	// idle closes a keep-alive connection between requests. The kubelet opens a connection per
	// probe (its probes do not keep alive) and Prometheus scrapes every 15 s or more, so an
	// idle connection is nobody's; 10 s lets a scraper reuse one when it scrapes that often.
	idle time.Duration
	// conns caps the connections of callers that are not the node. The pod's own callers are
	// the kubelet's probes (about three per container, each one connection at a time) and one
	// scraper; 64 is ten times that, and bounds the goroutines and buffers (about 8 KiB each)
	// a flood can make the supervisor hold to well under 1 MiB.
	conns int
	// nodeConns are kept for the node (node.go) once conns are taken: the kubelet's probes
	// get in whatever other pods hold.
	nodeConns int
}

var defaultHTTPLimits = httpLimits{readHeader: 2 * time.Second, idle: 10 * time.Second, conns: 64, nodeConns: 16}

// Serve answers the probes and metrics on l until the supervisor returns.
func (s *Supervisor) Serve(l net.Listener) error {
	lim := s.httpLimits
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: lim.readHeader, IdleTimeout: lim.idle}
	return srv.Serve(newCapListener(l, lim.conns, lim.nodeConns, s.fromNode))
}

// capListener admits at most conns connections, plus nodeConns from the node once those are
// taken. A connection over the cap is closed as soon as it is accepted rather than left in the
// kernel's backlog (which netutil.LimitListener does): queued there, the kubelet's probe would
// wait behind the flood and time out.
type capListener struct {
	net.Listener
	shared, node chan struct{}
	fromNode     func(remote string) bool
}

func newCapListener(l net.Listener, conns, nodeConns int, fromNode func(string) bool) *capListener {
	return &capListener{Listener: l, shared: make(chan struct{}, conns), node: make(chan struct{}, nodeConns), fromNode: fromNode}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if sem := l.slot(c); sem != nil {
			return &cappedConn{Conn: c, sem: sem}, nil
		}
		_ = c.Close()
	}
}

// slot takes a place for c: a shared one if any is free, else one kept for the node if c comes
// from it (only then is the node's address looked up); nil when c is over the cap.
func (l *capListener) slot(c net.Conn) chan struct{} {
	select {
	case l.shared <- struct{}{}:
		return l.shared
	default:
	}
	if !l.fromNode(c.RemoteAddr().String()) {
		return nil
	}
	select {
	case l.node <- struct{}{}:
		return l.node
	default:
		return nil
	}
}

type cappedConn struct {
	net.Conn
	sem  chan struct{}
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.sem })
	return err
}
