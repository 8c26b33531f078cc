// Package metrics holds the supervisor's Prometheus collectors: its process gauges and
// counters, and the per-port and per-process traffic read at scrape time from DPDK telemetry
// and ff_traffic. The supervisor decides when a value changes; this package only keeps it.
package metrics

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/fftraffic"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Metrics are the supervisor's own gauges and counters.
type Metrics struct {
	Reg      *prometheus.Registry
	Up       prometheus.Gauge
	expected prometheus.Gauge
	// procUp is up per process: a dashboard shows a row a process, and a process that never
	// came up is a 0 there, not a missing row.
	procUp      *prometheus.GaugeVec
	procs       atomic.Int64
	Starts      *prometheus.CounterVec
	TimeToReady prometheus.Gauge
	generation  prometheus.Gauge
	// gen backs fstack_dataplane_restarts_total: generation-1, read at scrape time.
	gen atomic.Int64
	// inPlace counts the generations this supervisor started in place, by reason.
	inPlaceMu sync.Mutex
	inPlace   map[string]int64
}

// New makes the gauges and counters and registers them in a registry of their own.
func New() *Metrics {
	m := &Metrics{
		Reg: prometheus.NewRegistry(),
		Up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fstack_processes_up",
			Help: "F-Stack processes running."}),
		expected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fstack_processes_expected",
			Help: "F-Stack processes the StackInstance asks for."}),
		procUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fstack_process_up",
			Help: "1 while the F-Stack process (by proc_id) is up, 0 from the render until it is ready and after it stopped."}, []string{"process"}),
		Starts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fstack_process_starts_total",
			Help: "Starts of each F-Stack process (by proc_id) by this supervisor."}, []string{"process"}),
		TimeToReady: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fstack_time_to_ready_seconds",
			Help: "Seconds from supervisor start to every process ready; 0 until ready."}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fstack_dataplane_generation",
			Help: "Dataplane generation: starts of the dataplane in this pod (container restarts and restarts for shim contexts), counted in the pod's shim volume."}),
	}
	m.inPlace = map[string]int64{}
	m.Reg.MustRegister(m.Up, m.expected, m.procUp, m.Starts, m.TimeToReady, m.generation, &restartsCollector{m: m})
	return m
}

// RestartedInPlace counts a generation started in place for reason (one of
// podcontract.DataplaneRestartReasons).
func (m *Metrics) RestartedInPlace(reason string) {
	m.inPlaceMu.Lock()
	m.inPlace[reason]++
	m.inPlaceMu.Unlock()
}

// ContainerRestartReason labels the restarts of the dataplane that were container restarts
// (the supervisor exited and the kubelet started it again): what the generation counted that
// this supervisor did not start in place.
const ContainerRestartReason = "container"

var restartsDesc = prometheus.NewDesc("fstack_dataplane_restarts_total",
	"Restarts of the dataplane in this pod by reason: in place (process_exit, contexts, port_down, start_failed) and container (the kubelet restarted the container); the sum is generation-1 and survives the container's restarts.",
	[]string{"reason"}, nil)

// restartsCollector answers fstack_dataplane_restarts_total at scrape time: every reason of the
// closed set (0 until it happens, so a rate over it has a series from the start).
type restartsCollector struct{ m *Metrics }

func (c *restartsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- restartsDesc }

func (c *restartsCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.inPlaceMu.Lock()
	var sum int64
	counts := map[string]int64{}
	for _, r := range podcontract.DataplaneRestartReasons {
		counts[r] = c.m.inPlace[r]
		sum += c.m.inPlace[r]
	}
	c.m.inPlaceMu.Unlock()
	counts[ContainerRestartReason] = max(c.m.gen.Load()-1-sum, 0)
	for r, n := range counts {
		ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(n), r)
	}
}

// AppRestartsDesc is fstack_app_restarts_total, which the supervisor answers from the app
// containers' launchers' records.
var AppRestartsDesc = prometheus.NewDesc("fstack_app_restarts_total",
	"Restarts of an app container's app in place by its launcher, by container and reason (exited, broken, dataplane, reload, other), from the launcher's record in the app-state volume; it survives the app container's restarts.",
	[]string{"container", "reason"}, nil)

// AppRestartsCollector answers fstack_app_restarts_total with what read returns at scrape time.
type AppRestartsCollector struct {
	Read func() map[string]podcontract.Restarts
}

func (c *AppRestartsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- AppRestartsDesc }

func (c *AppRestartsCollector) Collect(ch chan<- prometheus.Metric) {
	for container, r := range c.Read() {
		for reason, n := range r.ByReason {
			ch <- prometheus.MustNewConstMetric(AppRestartsDesc, prometheus.CounterValue, float64(n), container, reason)
		}
	}
}

// Expect publishes how many processes the stack runs, each down until it is ready.
func (m *Metrics) Expect(procs int) {
	m.expected.Set(float64(procs))
	m.procUp.Reset()
	m.procs.Store(int64(procs))
	for k := 0; k < procs; k++ {
		m.procUp.WithLabelValues(strconv.Itoa(k)).Set(0)
	}
}

// ProcessUp records that process k is ready.
func (m *Metrics) ProcessUp(k int) {
	m.Up.Inc()
	m.procUp.WithLabelValues(strconv.Itoa(k)).Set(1)
}

// AllDown records that every process stopped.
func (m *Metrics) AllDown() {
	m.Up.Set(0)
	for k := int64(0); k < m.procs.Load(); k++ {
		m.procUp.WithLabelValues(strconv.FormatInt(k, 10)).Set(0)
	}
}

// SetGeneration records the generation that started.
func (m *Metrics) SetGeneration(gen int) {
	m.gen.Store(int64(gen))
	m.generation.Set(float64(gen))
}

// nicCollector reads NIC counters from the primary's DPDK telemetry at scrape time.
type nicCollector struct {
	socket string
	peer   func() telemetry.Peer
	up     *prometheus.Desc
	descs  map[string]*prometheus.Desc
}

// telemetry key -> metric name.
var nicCounters = map[string]string{
	"ipackets": "fstack_nic_rx_packets_total", "opackets": "fstack_nic_tx_packets_total",
	"ibytes": "fstack_nic_rx_bytes_total", "obytes": "fstack_nic_tx_bytes_total",
	"imissed": "fstack_nic_rx_missed_total", "ierrors": "fstack_nic_rx_errors_total",
	"oerrors": "fstack_nic_tx_errors_total", "rx_nombuf": "fstack_nic_rx_nombuf_total",
}

// NewNICCollector reads the ports' counters from the primary's telemetry socket at scrape time,
// if the process serving it is one peer (asked at each scrape: the primary changes with each
// generation) accepts; fstack_nic_telemetry_up is 0 otherwise.
func NewNICCollector(socket string, peer func() telemetry.Peer) prometheus.Collector {
	c := &nicCollector{socket: socket, peer: peer, descs: map[string]*prometheus.Desc{},
		up: prometheus.NewDesc("fstack_nic_telemetry_up", "1 if the DPDK telemetry socket answered this scrape.", nil, nil)}
	for key, name := range nicCounters {
		c.descs[key] = prometheus.NewDesc(name, "DPDK ethdev counter "+key+" (telemetry /ethdev/stats).", []string{"port"}, nil)
	}
	return c
}

func (c *nicCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *nicCollector) Collect(ch chan<- prometheus.Metric) {
	ports, err := telemetry.AllEthdevStats(c.socket, 2*time.Second, c.peer())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, p := range ports {
		for key, v := range p.Stats {
			if d, ok := c.descs[key]; ok {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), strconv.Itoa(p.Port))
			}
		}
	}
}

// trafficCollector runs ff_traffic for every process at scrape time. The tool must run
// serially, so scrapes take turns.
type trafficCollector struct {
	mu     sync.Mutex
	reader *fftraffic.Reader
	procs  int
	descs  [6]*prometheus.Desc
}

// NewTrafficCollector reads each process's traffic through ff_traffic at scrape time.
func NewTrafficCollector(reader *fftraffic.Reader, procs int) prometheus.Collector {
	c := &trafficCollector{reader: reader, procs: procs}
	for i, n := range []string{"rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_dropped", "tx_dropped"} {
		c.descs[i] = prometheus.NewDesc("fstack_traffic_"+n+"_total", "F-Stack per-process "+n+" (ff_traffic -s; mbuf segments).", []string{"process"}, nil)
	}
	return c
}

func (c *trafficCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *trafficCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := 0; k < c.procs; k++ {
		t, err := c.reader.Read(context.Background(), k)
		if err != nil {
			continue
		}
		proc := strconv.Itoa(k)
		for i, v := range []uint64{t.RxPackets, t.RxBytes, t.TxPackets, t.TxBytes, t.RxDropped, t.TxDropped} {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v), proc)
		}
	}
}
