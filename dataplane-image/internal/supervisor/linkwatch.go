package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// ErrPortDown ends a generation one of whose ports stayed down longer than
// Config.LinkDownLimit; the caller runs the supervisor again (a new generation, which waits for
// OVS to connect before it is ready).
var ErrPortDown = errors.New("a port's link stayed down")

// The watch exists because of how a virtio-user port that is the vhost-user server (F-Stack's
// vdev with server=1, OVS the dpdkvhostuserclient) survives an OVS restart: DPDK notices the
// peer is gone, and later accepts its new connection and renegotiates, only when something
// reads the port's link status (rte_eth_link_get, or the LSC interrupt when the application
// enabled it). F-Stack enables no LSC interrupt and reads the link once at start, so after an
// OVS restart its port stays disconnected while the pod stays Ready. The primary's telemetry
// answers /ethdev/link_status with that same read, from its own thread: asking it every
// interval is what brings the port back, and what the pod's readiness, log and metrics report.

// linkTelemetryTimeout bounds one telemetry exchange: a reconnect renegotiates with OVS inside
// the primary's answer, which takes milliseconds, not seconds.
const linkTelemetryTimeout = 2 * time.Second

// linkMetrics are the link gauges and counters, registered once for every generation.
type linkMetrics struct {
	once  sync.Once
	up    *prometheus.GaugeVec
	downs *prometheus.CounterVec
}

func (s *Supervisor) linkMetrics() *linkMetrics {
	m := &s.links
	m.once.Do(func() {
		labels := []string{"port", "attachment"}
		m.up = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fstack_port_link_up",
			Help: "1 while the vhost-user port's link is up (by DPDK port id and network attachment), 0 while it is down: its peer, OVS, is gone (restarted, or the port removed). Read through the primary's DPDK telemetry every --link-interval once the dataplane is ready."}, labels)
		m.downs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fstack_port_link_down_total",
			Help: "Times the vhost-user port's link went down while the dataplane was ready (by DPDK port id and network attachment)."}, labels)
		s.metrics.Reg.MustRegister(m.up, m.downs)
	})
	return m
}

// watchedPort is one vhost-user port of the generation.
type watchedPort struct {
	id         int
	name       string // the spec's port name
	attachment string
	down       bool
	downSince  time.Time
}

func (p *watchedPort) labels() []string { return []string{strconv.Itoa(p.id), p.attachment} }

func (p *watchedPort) String() string {
	return fmt.Sprintf("port %d (attachment %s)", p.id, p.attachment)
}

// linkWatch reads the links of one generation's vhost-user ports.
type linkWatch struct {
	s      *Supervisor
	socket string
	gen    int
	ports  []*watchedPort
	conn   *telemetry.Client
	// failing is set while telemetry does not answer, so its failure is logged once.
	failing bool
	// fail ends the generation (ErrPortDown); cancel and done end the readings.
	fail   context.CancelCauseFunc
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// linkPorts are the spec's vhost-user ports with their DPDK ids, in id order. PCI and bonded
// ports are not watched: a NIC's link down is a cable or a switch, which neither a reconnect
// nor a restart mends.
func linkPorts(spec *fsv1.StackInstanceSpec, res *render.Result) []*watchedPort {
	var ports []*watchedPort
	for _, p := range spec.Ports {
		id, ok := res.PortIDs[p.Name]
		if !ok || p.Device.VhostUser == nil {
			continue
		}
		ports = append(ports, &watchedPort{id: id, name: p.Name, attachment: p.Attachment})
	}
	slices.SortFunc(ports, func(a, b *watchedPort) int { return a.id - b.id })
	return ports
}

// watchLinks starts reading the links of the generation's vhost-user ports every
// Cfg.LinkInterval. Run calls it once the generation is ready: DPDK's start waits for OVS to
// connect each server-mode port, so every link is up then and readiness does not flap. It
// returns nil (nothing watched) when the interval is 0 or there is no vhost-user port.
func (g *generation) watchLinks() *linkWatch {
	s := g.s
	ports := linkPorts(g.spec, g.res)
	if s.Cfg.LinkInterval <= 0 || len(ports) == 0 {
		return nil
	}
	gen := g.gen
	w := &linkWatch{s: s, socket: telemetry.SocketPath(s.Cfg.Paths.RuntimeDir, g.prefix), gen: gen, ports: ports,
		fail: g.end, done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(g.ctx)
	names := make([]string, len(ports))
	for i, p := range ports {
		names[i] = p.String()
	}
	s.log.Info("port links: read every interval through the primary's telemetry", "ports", strings.Join(names, ", "),
		"interval", s.Cfg.LinkInterval.String(), "downLimit", s.Cfg.LinkDownLimit.String(), logging.KeyGeneration, gen)
	s.SetPorts(w.portStatus())
	go w.loop()
	return w
}

func (w *linkWatch) loop() {
	defer close(w.done)
	defer w.closeConn()
	t := time.NewTicker(w.s.Cfg.LinkInterval)
	defer t.Stop()
	for {
		if err := w.check(); err != nil {
			w.fail(err)
			return
		}
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check reads every port once and acts on what changed; an error ends the generation.
func (w *linkWatch) check() error {
	for _, p := range w.ports {
		up, err := w.read(p.id)
		if !w.s.health.ready.Load() {
			// Stopping: shutdown withdraws readiness before it signals a process, so a port
			// read down from here on is going down with its generation.
			return nil
		}
		if err != nil {
			w.telemetryFailed(err)
			return nil // unknown is not down: the next tick asks again
		}
		if err := w.observe(p, up); err != nil {
			return err
		}
	}
	if w.failing {
		w.failing = false
		w.s.log.Info("port links: the primary's telemetry answers again", logging.KeyGeneration, w.gen)
	}
	w.publish()
	return nil
}

// read asks one port's link, on a connection kept across ticks (a new one after any error: a
// late reply would otherwise answer the next question).
func (w *linkWatch) read(port int) (bool, error) {
	if w.conn == nil {
		c, err := telemetry.Dial(w.socket, linkTelemetryTimeout, w.s.primaryPeer())
		if err != nil {
			return false, err
		}
		w.conn = c
	}
	up, err := w.conn.EthdevLinkUp(port)
	if err != nil {
		w.closeConn()
	}
	return up, err
}

func (w *linkWatch) closeConn() {
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn = nil
	}
}

// telemetryFailed logs the first failure of a run of them.
func (w *linkWatch) telemetryFailed(err error) {
	if w.failing {
		return
	}
	w.failing = true
	w.s.log.Warn("port links: cannot read them through the primary's telemetry; the ports' state is unknown until it answers", logging.KeyErr, err, logging.KeyGeneration, w.gen)
}

// observe records one reading of p.
func (w *linkWatch) observe(p *watchedPort, up bool) error {
	m := w.s.linkMetrics()
	now := w.s.Now()
	switch {
	case up && p.down:
		p.down = false
		w.s.log.Info("port link up again: the vhost-user peer reconnected", logging.KeyPort, p.id, logging.KeyIfname, p.attachment,
			"downFor", now.Sub(p.downSince).Round(time.Millisecond).String(), logging.KeyGeneration, w.gen)
	case !up && !p.down:
		p.down, p.downSince = true, now
		m.downs.WithLabelValues(p.labels()...).Inc()
		w.s.log.Error("port link down: its vhost-user peer (OVS) is gone, restarted or the port removed; readiness withdrawn until it reconnects",
			logging.KeyPort, p.id, logging.KeyIfname, p.attachment, logging.KeyGeneration, w.gen)
	case !up && w.s.Cfg.LinkDownLimit > 0 && now.Sub(p.downSince) >= w.s.Cfg.LinkDownLimit:
		msg := fmt.Sprintf("%s: link down for %s, longer than --link-down-limit: restarting the dataplane", p, now.Sub(p.downSince).Round(time.Second))
		w.s.log.Error(msg, logging.KeyPort, p.id, logging.KeyIfname, p.attachment, logging.KeyGeneration, w.gen)
		return fmt.Errorf("%w: %s", ErrPortDown, msg)
	}
	v := 0.0
	if up {
		v = 1
	}
	m.up.WithLabelValues(p.labels()...).Set(v)
	return nil
}

// publish withdraws readiness while a port is down, saying which and for how long.
func (w *linkWatch) publish() {
	var reasons []string
	now := w.s.Now()
	for _, p := range w.ports {
		if p.down {
			reasons = append(reasons, fmt.Sprintf("%s: link down for %s: the vhost-user peer (OVS) is gone, restarted or the port removed; reconnecting when it is back",
				p, now.Sub(p.downSince).Round(time.Second)))
		}
	}
	if w.s.Cfg.LinkDownLimit > 0 && len(reasons) > 0 {
		reasons[len(reasons)-1] += fmt.Sprintf(" (the dataplane restarts after %s down)", w.s.Cfg.LinkDownLimit)
	}
	w.s.health.degrade(strings.Join(reasons, "; "))
	w.s.SetPorts(w.portStatus())
}

// portStatus is the ports' links as /status shows them.
func (w *linkWatch) portStatus() []podcontract.PortStatus {
	out := make([]podcontract.PortStatus, 0, len(w.ports))
	for _, p := range w.ports {
		ps := podcontract.PortStatus{Port: p.id, Attachment: p.attachment, LinkUp: !p.down}
		if p.down {
			t := p.downSince
			ps.DownSince = &t
		}
		out = append(out, ps)
	}
	return out
}

// Stop ends the readings and the readiness they withdrew (nil-safe): the next generation
// starts afresh.
func (w *linkWatch) Stop() {
	if w == nil {
		return
	}
	w.cancel()
	<-w.done
	w.s.health.degrade("")
}

// degraded is why a ready generation is not ready now (a port's link down), "" when it is.
type degraded struct{ reason atomic.Pointer[string] }

func (d *degraded) degrade(reason string) {
	if reason == "" {
		d.reason.Store(nil)
		return
	}
	d.reason.Store(&reason)
}

func (d *degraded) why() string {
	if r := d.reason.Load(); r != nil {
		return *r
	}
	return ""
}

// readyNow is /readyz's answer: the generation is ready and no port is down.
func (h *health) readyNow() bool { return h.ready.Load() && h.why() == "" }

// notReadyReason says why /readyz fails: a down port while the generation runs, else the
// generation's own state.
func (h *health) notReadyReason() string {
	if r := h.why(); r != "" && h.ready.Load() {
		return r
	}
	return h.text()
}
