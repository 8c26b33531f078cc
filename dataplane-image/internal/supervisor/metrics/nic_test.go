package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/telemetry"
	"github.com/kube-fstack/kube-fstack/internal/test/pktserver"
)

// An app container shares the DPDK runtime directory and can bind the telemetry socket's name:
// its counters must not reach /metrics. The server runs in the test process (no DPDK in this
// tier); the primary is a real child process that serves nothing.
func TestNICCountersComeOnlyFromThePrimary(t *testing.T) {
	path := filepath.Join(t.TempDir(), telemetry.SocketName)
	pktserver.Serve(t, path, []byte(`{"version": "DPDK 23.11.0", "pid": 1, "max_output_len": 16384}`), func(req string) []byte {
		if req == "/ethdev/list" {
			return []byte(`{"/ethdev/list": [0]}`)
		}
		return []byte(`{"/ethdev/stats": {"ipackets": 999}}`)
	})
	primary := exec.Command("sleep", "60")
	if err := primary.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Process.Kill(); _ = primary.Wait() })

	for _, tc := range []struct {
		name   string
		peer   int
		wantUp string
	}{
		{"served by another process", primary.Process.Pid, "fstack_nic_telemetry_up 0"},
		{"no primary running", 0, "fstack_nic_telemetry_up 0"},
		{"served by the primary (control: the server accepted)", os.Getpid(), "fstack_nic_telemetry_up 1"},
	} {
		reg := prometheus.NewPedanticRegistry()
		pid := tc.peer
		reg.MustRegister(NewNICCollector(path, func() telemetry.Peer { return telemetry.ProcessOf(pid) }))
		out := gather(t, reg)
		if !strings.Contains(out, tc.wantUp) {
			t.Errorf("%s: want %q in\n%s", tc.name, tc.wantUp, out)
		}
		if got := strings.Contains(out, `fstack_nic_rx_packets_total{port="0"} 999`); got != strings.HasSuffix(tc.wantUp, "1") {
			t.Errorf("%s: the server's counter in /metrics: %v\n%s", tc.name, got, out)
		}
	}
}

func gather(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			var v float64
			switch {
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			}
			b.WriteString(name + " " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
		}
	}
	return b.String()
}
