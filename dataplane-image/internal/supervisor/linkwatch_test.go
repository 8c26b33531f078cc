package supervisor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// fakeLinkTelemetry is the primary's telemetry socket as the link watch meets it: the unit tier
// has no DPDK, so it is a fake; the dataplane tier (test/dpdk/linkwatch_test.go) asks a real
// testpmd behind a restarted OVS. It answers the start's readiness (the port started) and
// /ethdev/link_status,0 with link ("UP", "DOWN", or anything else: a null reply, the
// primary's answer when it cannot read the link).
type fakeLinkTelemetry struct {
	link atomic.Value
	// asked counts link_status requests; early is set when one came before the ready marker.
	asked atomic.Int64
	early atomic.Bool
}

func serveFakeLinkTelemetry(t *testing.T, h *harness) *fakeLinkTelemetry {
	t.Helper()
	f := &fakeLinkTelemetry{}
	f.link.Store("UP")
	path := telemetry.SocketPath(h.paths.RuntimeDir, DefaultPrefix)
	mustDo(t, os.MkdirAll(filepath.Dir(path), 0o755))
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	mustDo(t, err)
	var conns sync.WaitGroup
	t.Cleanup(func() { l.Close(); conns.Wait() })
	go func() {
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() { defer conns.Done(); f.serve(c, h) }()
		}
	}()
	return f
}

func (f *fakeLinkTelemetry) serve(c *net.UnixConn, h *harness) {
	defer c.Close()
	_, _ = c.Write([]byte(`{"version": "DPDK 23.11.0", "pid": 1, "max_output_len": 16384}`))
	buf := make([]byte, 1024)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		var reply string
		switch string(buf[:n]) {
		case "/ethdev/info,0":
			reply = `{"/ethdev/info": {"name": "virtio_user0", "port_id": 0, "dev_started": 1}}`
		case "/ethdev/link_status,0":
			if h.shimFile(podcontract.ReadyFile) == "" {
				f.early.Store(true)
			}
			switch link := f.link.Load().(string); link {
			case "UP":
				reply = `{"/ethdev/link_status": {"status": "UP", "speed": 10000, "duplex": "full-duplex"}}`
			case "DOWN":
				reply = `{"/ethdev/link_status": {"status": "DOWN"}}`
			default:
				reply = `{"/ethdev/link_status": null}`
			}
			f.asked.Add(1)
		default:
			reply = `{"x": null}`
		}
		_, _ = c.Write([]byte(reply))
	}
}

// waitAsked waits until the watch has asked n more times: then it has acted on the link the
// test set before.
func (f *fakeLinkTelemetry) waitAsked(t *testing.T, n int64) {
	t.Helper()
	from := f.asked.Load()
	eventually(t, "the link watch to ask again", func() bool { return f.asked.Load() >= from+n })
}

func linkSupervisor(h *harness, limit time.Duration) *Supervisor {
	s := h.supervisor("primary", "secondary")
	s.Cfg.LinkInterval, s.Cfg.LinkDownLimit = 10*time.Millisecond, limit
	return s
}

// A port whose peer goes away: readiness is withdrawn with a reason naming the port, its
// attachment and what happened, the metric follows, an ERROR line says it went down and an INFO
// line how long it was; back up, the generation is ready again (the same generation: the
// reconnect is in place). Telemetry that cannot say is not a down port. The first reading comes
// only after the generation is ready, so the start's readiness never flaps.
func TestLinkDownWithdrawsReadinessUntilItIsBack(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	h.writeDevinfo()
	tel := serveFakeLinkTelemetry(t, h)
	s := linkSupervisor(h, 0)
	hh := s.handler()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := run(s, ctx)
	eventually(t, "ready", func() bool { c, _ := get(t, hh, podcontract.ReadyzPath); return c == http.StatusOK })
	tel.waitAsked(t, 2)
	if tel.early.Load() {
		t.Error("the link was asked before the generation was ready: the start's readiness could flap")
	}
	assertMetric(t, hh, `fstack_port_link_up{attachment="net1",port="0"} 1`)

	tel.link.Store("DOWN")
	tel.waitAsked(t, 2)
	code, body := get(t, hh, podcontract.ReadyzPath)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "port 0 (attachment net1): link down for ") ||
		!strings.Contains(body, "the vhost-user peer (OVS) is gone") {
		t.Errorf("/readyz with the link down = %d %q, want 503 naming the port, its attachment and why", code, body)
	}
	if code, _ := get(t, hh, podcontract.HealthzPath); code != http.StatusOK {
		t.Errorf("/healthz with the link down = %d: the kubelet must not kill a dataplane that is reconnecting", code)
	}
	assertMetric(t, hh, `fstack_port_link_up{attachment="net1",port="0"} 0`)
	assertMetric(t, hh, `fstack_port_link_down_total{attachment="net1",port="0"} 1`)
	// /status, which kubectl fstack status and doctor read, says the same.
	if _, body := get(t, hh, podcontract.StatusPath); !strings.Contains(body, `"ready":false`) ||
		!strings.Contains(body, `"reason":"port 0 (attachment net1): link down for `) ||
		!strings.Contains(body, `{"port":0,"attachment":"net1","linkUp":false,"downSince":`) {
		t.Errorf("/status with the link down = %s, want not ready, the port's reason and its link down", body)
	}
	if l := h.logLine("port link down", logging.KeyPort, 0, logging.KeyIfname, "net1", logging.KeyGeneration, 1); l == nil || l["level"] != "ERROR" {
		t.Errorf("no ERROR line naming the port going down:\n%s", h.log.String())
	}

	tel.link.Store("UP")
	tel.waitAsked(t, 2)
	if code, body := get(t, hh, podcontract.ReadyzPath); code != http.StatusOK {
		t.Errorf("/readyz with the link back = %d %q", code, body)
	}
	assertMetric(t, hh, `fstack_port_link_up{attachment="net1",port="0"} 1`)
	if l := h.logLine("port link up again", logging.KeyPort, 0, logging.KeyIfname, "net1"); l == nil || l["level"] != "INFO" || l["downFor"] == "" {
		t.Errorf("no INFO line saying how long the port was down:\n%s", h.log.String())
	}

	tel.link.Store("unknown")
	tel.waitAsked(t, 3)
	if code, body := get(t, hh, podcontract.ReadyzPath); code != http.StatusOK {
		t.Errorf("/readyz while telemetry cannot read the link = %d %q: unknown is not down", code, body)
	}
	if n := strings.Count(h.log.String(), "port links: cannot read them"); n != 1 {
		t.Errorf("a run of telemetry failures logs %d warnings, want one:\n%s", n, h.log.String())
	}
	tel.link.Store("UP")
	tel.waitAsked(t, 2)
	if !h.logged("port links: the primary's telemetry answers again") {
		t.Errorf("no line saying telemetry answers again:\n%s", h.log.String())
	}

	stop()
	if err := waitResult(t, res); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if n := strings.Count(h.log.String(), "port link down"); n != 1 {
		t.Errorf("the stop was taken for a port going down:\n%s", h.log.String())
	}
	if g := h.shimFile(podcontract.GenerationFile); g != "1" {
		t.Errorf("generation %q: a reconnect in place must not restart the dataplane", g)
	}
}

// A port down longer than the limit ends the generation with ErrPortDown, which the caller
// turns into a restart in place: the processes are stopped, readiness says why, and liveness
// stays green.
func TestLinkDownTooLongEndsTheGeneration(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	h.writeDevinfo()
	tel := serveFakeLinkTelemetry(t, h)
	s := linkSupervisor(h, 100*time.Millisecond)
	hh := s.handler()
	res := run(s, context.Background())
	eventually(t, "ready", func() bool { c, _ := get(t, hh, podcontract.ReadyzPath); return c == http.StatusOK })
	tel.link.Store("DOWN")
	err := waitResult(t, res)
	if !errors.Is(err, ErrPortDown) || !strings.Contains(err.Error(), "port 0 (attachment net1): link down for ") {
		t.Fatalf("Run = %v, want ErrPortDown naming the port", err)
	}
	if code, body := get(t, hh, podcontract.ReadyzPath); code != http.StatusServiceUnavailable || !strings.Contains(body, "longer than --link-down-limit") {
		t.Errorf("/readyz after the generation ended = %d %q", code, body)
	}
	if code, _ := get(t, hh, podcontract.HealthzPath); code != http.StatusOK {
		t.Errorf("/healthz = %d: a restart in place is not a liveness failure", code)
	}
	if !h.logged("process stopped", logging.KeyProcess, 0) {
		t.Errorf("the primary was not stopped:\n%s", h.log.String())
	}
	if h.shimFile(podcontract.ReadyFile) != "" {
		t.Error("the ready marker survived the generation")
	}
	assertMetric(t, hh, `fstack_port_link_up{attachment="net1",port="0"} 0`)
}

func assertMetric(t *testing.T, h http.Handler, line string) {
	t.Helper()
	if _, body := get(t, h, podcontract.MetricsPath); !strings.Contains(body, "\n"+line+"\n") {
		t.Errorf("/metrics lacks %q:\n%s", line, body)
	}
}
