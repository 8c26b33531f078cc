package appprobe

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/syncbuf"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// harmlessLibrary is a library the fake agent can preload for real: the C library it already uses.

// An agent that never stays up is started a bounded number of times: each start of a real one
// takes a shim context, and one that crashes never gives it back.
func TestProbeAgentStartsAreBounded(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agent")
	must(t, os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	log := &syncbuf.Buffer{}
	a := newAgent(bin, nil, slog.New(slog.NewTextHandler(log, nil)))
	var told []string
	a.exhausted = func(msg string) { told = append(told, msg) }
	req := func(time.Duration) []byte { return []byte("tcp 127.0.0.1 80 100\n") }
	var err error
	for range a.maxStarts + 2 {
		_, err = a.ask(req, time.Now().Add(time.Second))
	}
	if err == nil || !strings.Contains(err.Error(), "started 5 times") {
		t.Fatalf("want the start bound in the error, got %v", err)
	}
	// Running out is said once, loudly: the log, the metric and the supervisor's health.
	if len(told) != 1 || strings.Count(log.String(), "started 5 times in this generation") != 1 {
		t.Errorf("want the exhausted budget told once, got %q and log:\n%s", told, log.String())
	}
	var m dto.Metric
	must(t, a.metrics.exhausted.Write(&m))
	if v := m.GetGauge().GetValue(); v != 1 {
		t.Errorf("fstack_probe_agent_starts_exhausted = %g, want 1", v)
	}
}

func TestAgentCPU(t *testing.T) {
	eal := func(masks ...string) *render.Result {
		res := &render.Result{}
		for _, m := range masks {
			res.EAL = append(res.EAL, []string{"f-stack", "-c" + m, "-n4"})
		}
		return res
	}
	for _, c := range []struct {
		res  *render.Result
		want int
		ok   bool
	}{
		{eal("4"), 2, true},                                 // one process: its CPU
		{eal("4", "8", "10"), 4, true},                      // the last process's, not process 0's
		{eal("4", "8000000000000"), 2, true},                // CPU 51 is above what the shim takes
		{eal("8000000000000", "10000000000000"), 52, false}, // none it takes: warned
	} {
		if got, ok := agentCPU(c.res); got != c.want || ok != c.ok {
			t.Errorf("%v: CPU %d %v, want %d %v", c.res.EAL, got, ok, c.want, c.ok)
		}
	}
}
