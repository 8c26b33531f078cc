package dpdk

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// An OVS restart while the pod serves (a node's OVS upgrade or maintenance): the vhost-user
// port's peer goes away and comes back. F-Stack reads its link only at start, and so does the
// stand-in here (testpmd without link-status interrupts, startDataplane): DPDK accepts OVS's
// new connection only when something reads the link, so without the supervisor's link watch
// the port stays disconnected behind a Ready pod. With it: while OVS is down /readyz answers
// 503 naming the port and fstack_port_link_up is 0; once OVS is back the same primary takes the
// connection again (no restart, the same generation), OVS shows the interface connected, pings
// get through, /readyz is 200 and the metric 1.
func TestOVSRestartReconnectsThePortInPlace(t *testing.T) {
	p := newPod(t, "fsdpo", "10.99.7.21", 1)
	d := p.startDataplane(t, "1")
	d.waitReady(t)
	peer := addVethPeer(t, "10.99.7.205/24")
	pingThrough(t, peer, p.ip)
	primary := d.pidOf(t, "dpdk-testpmd")
	const up, down, downs = `fstack_port_link_up{attachment="net1",port="0"} 1`, `fstack_port_link_up{attachment="net1",port="0"} 0`,
		`fstack_port_link_down_total{attachment="net1",port="0"} 1`
	d.waitMetric(t, up)

	// Both daemons go, as hack/cluster/ovs-restart.sh stops them; OVS stays down until the port
	// has been seen down, so the test does not depend on how long a restart takes.
	env.ovs.StopVswitchd()
	env.ovs.StopDB()
	restarted := false
	t.Cleanup(func() {
		if !restarted { // the package's later tests need OVS
			_ = env.ovs.StartDB()
			_ = env.ovs.StartVswitchd()
		}
	})
	// What is seen while OVS is down is checked without stopping the test, which goes on to
	// show whether the port comes back.
	if code, body := d.waitReadyzCode(http.StatusServiceUnavailable); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "port 0 (attachment net1): link down for ") || !strings.Contains(body, "OVS") {
		t.Errorf("/readyz while OVS is down = %d %q, want 503 naming the port, its attachment and OVS", code, body)
	}
	d.waitMetric(t, down)
	d.waitMetric(t, downs)
	if _, l := d.logLine(t, "port link down", logging.KeyPort, 0, logging.KeyIfname, "net1"); l == nil || l["level"] != "ERROR" {
		t.Errorf("no ERROR line naming the port that went down:\n%s", d.log())
	}

	must(t, env.ovs.StartDB())
	must(t, env.ovs.StartVswitchd())
	restarted = true
	p.waitInterfaceConnected(t)
	pingThrough(t, peer, p.ip)
	if code, body := d.waitReadyzCode(http.StatusOK); code != http.StatusOK {
		t.Errorf("/readyz once OVS is back = %d %q", code, body)
	}
	d.waitMetric(t, up)
	if _, l := d.logLine(t, "port link up again", logging.KeyPort, 0, logging.KeyIfname, "net1"); l == nil || l["level"] != "INFO" || l["downFor"] == "" {
		t.Errorf("no INFO line saying how long the port was down:\n%s", d.log())
	}
	if now := d.pidOf(t, "dpdk-testpmd"); now != primary || p.file(podcontract.GenerationFile) != "1" {
		t.Errorf("primary %d -> %d, generation %s: the port must reconnect in place, without a restart", primary, now, p.file(podcontract.GenerationFile))
	}
}

// waitInterfaceConnected waits, bounded, until OVS shows the pod's vhost-user interface
// connected: OVS says so once the pod's DPDK has negotiated the port again.
func (p *pod) waitInterfaceConnected(t *testing.T) {
	t.Helper()
	const within = 60 * time.Second
	var status string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, err := env.ovs.Vsctl("--timeout=10", "get", "Interface", p.name, "status")
		status = strings.TrimSpace(out)
		if err == nil && strings.Contains(status, "status=connected") {
			return
		}
	}
	t.Fatalf("OVS's interface %s is not connected %s after OVS came back: %s", p.name, within, status)
}

// waitReadyzCode waits, bounded, for /readyz to answer code; it returns the last answer.
func (d *dataplane) waitReadyzCode(code int) (int, string) {
	var got int
	var body string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, body = d.get(podcontract.ReadyzPath); got == code {
			break
		}
	}
	return got, body
}

// waitMetric waits, bounded, for /metrics to have line; an error if it never has.
func (d *dataplane) waitMetric(t *testing.T, line string) {
	t.Helper()
	var body string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, body = d.get(podcontract.MetricsPath); strings.Contains(body, "\n"+line+"\n") {
			return
		}
	}
	t.Errorf("/metrics has no %q:\n%s", line, body)
}
