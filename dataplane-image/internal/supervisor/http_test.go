package supervisor

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/fftraffic"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// get asks path as the operator does: with the pod's status token, which the harness's
// supervisors hold (testToken).
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set(podcontract.StatusTokenHeader, testToken)
	h.ServeHTTP(rec, r)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// testToken is the status token of the tests' pods.
var testToken = strings.Repeat("0123456789abcdef", 4)

func TestProbesFollowTheProcesses(t *testing.T) {
	s := New(Config{}, nil, io.Discard)
	h := s.handler()
	if code, _ := get(t, h, podcontract.ReadyzPath); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before start = %d", code)
	}
	if code, _ := get(t, h, podcontract.HealthzPath); code != http.StatusOK {
		t.Errorf("/healthz while starting = %d", code)
	}
	s.health.ready.Store(true)
	if code, _ := get(t, h, podcontract.ReadyzPath); code != http.StatusOK {
		t.Errorf("/readyz when ready = %d", code)
	}
	s.health.ready.Store(false)
	s.health.failed.Store(true)
	s.health.set("F-Stack process 0 (primary) exited: exit status 1")
	if code, body := get(t, h, podcontract.HealthzPath); code != http.StatusServiceUnavailable || !strings.Contains(body, "process 0") {
		t.Errorf("/healthz after a death = %d %q", code, body)
	}
}

// With ?wait=, a failing probe is held until its condition holds (answered then, not a probe
// period later) or the wait passes; without it, it answers at once.
func TestProbesLongPoll(t *testing.T) {
	s := New(Config{}, nil, io.Discard)
	h := s.handler()
	if code, _ := get(t, h, podcontract.StartedzPath); code != http.StatusServiceUnavailable {
		t.Errorf("/startedz before the shim is placed = %d", code)
	}
	if code, _ := get(t, h, podcontract.ReadyzPath+"?wait=30ms"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz?wait=30ms while never ready = %d", code)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		s.health.started.Store(true)
	}()
	if code, _ := get(t, h, podcontract.StartedzPath+"?wait=5s"); code != http.StatusOK {
		t.Errorf("/startedz?wait=5s when the shim is placed meanwhile = %d", code)
	}
	done := make(chan int)
	go func() { code, _ := get(t, h, podcontract.ReadyzPath+podcontract.ProbeWait); done <- code }()
	time.Sleep(20 * time.Millisecond)
	s.health.ready.Store(true)
	if code := <-done; code != http.StatusOK {
		t.Errorf("/readyz%s when ready comes meanwhile = %d", podcontract.ProbeWait, code)
	}
}

func TestMetricsExposeProcessesAndNIC(t *testing.T) {
	s := New(Config{}, nil, io.Discard)
	s.metrics.Up.Set(2)
	s.metrics.Starts.WithLabelValues("0").Inc()
	s.registerCollectors("rte", 2) // RuntimeDir empty: telemetry cannot answer
	_, body := get(t, s.handler(), podcontract.MetricsPath)
	for _, want := range []string{"fstack_processes_up 2", `fstack_process_starts_total{process="0"} 1`, "fstack_time_to_ready_seconds 0", "fstack_nic_telemetry_up 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// ff_traffic cannot run here; a script prints what it prints, per proc.
func TestMetricsFromFFTraffic(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ff_traffic")
	mustDo(t, os.WriteFile(bin, []byte("#!/bin/sh\necho rx_packets,rx_bytes,tx_packets,tx_bytes,rx_dropped,tx_dropped\necho $(($2+10)),1000,5,500,0,1\n"), 0o755))
	s := New(Config{}, nil, io.Discard)
	s.Traffic = &fftraffic.Reader{Binary: bin, Timeout: 5 * time.Second}
	s.registerCollectors("rte", 2)
	_, body := get(t, s.handler(), podcontract.MetricsPath)
	for _, want := range []string{`fstack_traffic_rx_packets_total{process="0"} 10`, `fstack_traffic_rx_packets_total{process="1"} 11`, `fstack_traffic_tx_dropped_total{process="1"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}
