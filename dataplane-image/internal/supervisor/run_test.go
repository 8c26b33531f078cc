package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/readiness"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func TestStartsPrimaryThenSecondariesAndStopsCleanly(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.writeDevinfo()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := run(h.supervisor("primary", "secondary"), ctx)
	eventually(t, "the ready marker", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })

	log := h.log.String()
	up0, start1 := h.logIndex("process is up", logging.KeyProcess, 0), h.logIndex("starting process", logging.KeyProcess, 1)
	if up0 < 0 || start1 < 0 || up0 > start1 {
		t.Errorf("the secondary must start after the primary is ready:\n%s", log)
	}
	if !h.logged("fake primary pid", logging.KeyProcess, 0, logging.KeyStream, "output", logging.KeyPID, "") ||
		!h.logged("second line", logging.KeyProcess, 1, logging.KeyStream, "output") {
		t.Errorf("children's output is not logged line by line with its proc-id:\n%s", log)
	}
	if argv := h.logLine("starting process", logging.KeyProcess, 1)["argv"]; !strings.Contains(argv, "--proc-type=secondary") || !strings.Contains(argv, "-c8 ") {
		t.Errorf("process 1 did not get its own EAL argv (secondary, CPU 3):\n%s", log)
	}
	if g := h.shimFile(podcontract.GenerationFile); g != "1" {
		t.Errorf("generation = %q, want 1", g)
	}
	if cfg, _ := os.ReadFile(h.paths.ConfigFile); !strings.Contains(string(cfg), "lcore_mask=c") {
		t.Errorf("config.ini lacks the lcore mask of CPUs 2,3:\n%s", cfg)
	}
	if h.shimFile("config.ini") == "" {
		t.Error("no copy of config.ini in the shim dir")
	}

	stop()
	if err := waitResult(t, res); err != nil {
		t.Fatalf("a SIGTERM stop must return nil, got %v", err)
	}
	if h.shimFile(podcontract.ReadyFile) != "" {
		t.Error("the ready marker survived the stop")
	}
	log = h.log.String()
	if !h.logged("process stopped", logging.KeyProcess, 1, "status", "exit status 0") || !h.logged("process stopped", logging.KeyProcess, 0, "status", "exit status 0") {
		t.Errorf("both processes must have ended on SIGTERM:\n%s", log)
	}
}

func TestPrimaryNeverReadyTimesOut(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	h.writeDevinfo()
	s := h.supervisor("primary-never-ready", "secondary")
	s.Cfg.Timing.StartTimeout = 400 * time.Millisecond
	err := waitResult(t, run(s, context.Background()))
	if err == nil || !strings.Contains(err.Error(), "process 0 was not ready within 400ms") || !strings.Contains(err.Error(), "EAL init not finished") {
		t.Fatalf("want a timeout naming the primary and what it lacked, got %v", err)
	}
	if h.shimFile(podcontract.ReadyFile) != "" {
		t.Error("ready marker written for a primary that never became ready")
	}
	if g := h.shimFile(podcontract.GenerationFile); g != "1" {
		t.Errorf("the generation moves before processes start: got %q", g)
	}
	if !h.logged("process stopped", logging.KeyProcess, 0, "status", "exit status 0") {
		t.Errorf("the primary must be stopped after the timeout:\n%s", h.log)
	}
}

func TestPrimaryDyingWhileStarting(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.writeDevinfo()
	err := waitResult(t, run(h.supervisor("primary-dies", "secondary"), context.Background()))
	if err == nil || !strings.Contains(err.Error(), "process 0 died while starting (exit status 3)") {
		t.Fatalf("got %v", err)
	}
	if h.logged("starting process", logging.KeyProcess, 1) {
		t.Error("a secondary was started without a primary")
	}
}

func TestSecondaryDeathStopsEverythingNonZero(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.writeDevinfo()
	res := run(h.supervisor("primary", "secondary-dies"), context.Background())
	eventually(t, "ready", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	err := waitResult(t, res)
	if err == nil || !strings.Contains(err.Error(), "F-Stack process 1 (secondary) exited: exit status 7") {
		t.Fatalf("want an error naming process 1 and its status, got %v", err)
	}
	if h.shimFile(podcontract.ReadyFile) != "" {
		t.Error("the ready marker survived a dead process")
	}
	if !h.logged("process stopped", logging.KeyProcess, 0, "status", "exit status 0") {
		t.Errorf("the primary must be stopped when a secondary dies:\n%s", h.log)
	}
}

func TestSIGTERMDuringStart(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	h.writeDevinfo()
	s := h.supervisor("primary-never-ready", "secondary")
	s.Cfg.Timing.StartTimeout = time.Minute
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := run(s, ctx)
	eventually(t, "the primary to start", func() bool { return h.logged("fake", logging.KeyProcess, 0, logging.KeyStream, "output") })
	begin := time.Now()
	stop()
	if err := waitResult(t, res); err != nil {
		t.Fatalf("SIGTERM while starting must stop cleanly, got %v", err)
	}
	if time.Since(begin) > 5*time.Second {
		t.Error("the stop waited for the start timeout")
	}
	if !h.logged("process stopped", logging.KeyProcess, 0, "status", "exit status 0") {
		t.Errorf("the primary was not stopped:\n%s", h.log)
	}
}

func TestKillAfterGrace(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	h.writeDevinfo()
	s := h.supervisor("primary-ignores-term", "secondary")
	s.Cfg.Timing.Grace = 300 * time.Millisecond
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := run(s, ctx)
	eventually(t, "ready", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	stop()
	if err := waitResult(t, res); err != nil {
		t.Fatal(err)
	}
	if !h.logged("process stopped", logging.KeyProcess, 0, "status", "killed by signal killed") {
		t.Errorf("a process ignoring SIGTERM must be killed after the grace period:\n%s", h.log)
	}
}

func TestGenerationMovesOnEveryStart(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	h.writeDevinfo()
	for want := 1; want <= 2; want++ {
		ctx, stop := context.WithCancel(context.Background())
		res := run(h.supervisor("primary", "secondary"), ctx)
		eventually(t, "ready", func() bool { return h.shimFile(podcontract.ReadyFile) == string(rune('0'+want)) })
		stop()
		mustDo(t, waitResult(t, res))
		if g := h.shimFile(podcontract.GenerationFile); g != string(rune('0'+want)) {
			t.Errorf("start %d: generation %q", want, g)
		}
	}
}

// A stale config from a primary that died holds no lock: never ready.
func TestStaleRuntimeConfigIsNotReady(t *testing.T) {
	rd := t.TempDir()
	mustDo(t, os.MkdirAll(filepath.Join(rd, "rte"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(rd, "rte", "config"), []byte{0xee, 0x6b, 0x2e, 0x01}, 0o600)) // RTE magic, little-endian
	err := readiness.PrimaryState(rd, "rte")
	if err == nil || !strings.Contains(err.Error(), "no process holds its lock") {
		t.Fatalf("got %v", err)
	}
}

func TestInvalidFactsStopBeforeAnyProcess(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.cpus = []int{3}
	err := waitResult(t, run(h.supervisor("primary", "secondary"), context.Background()))
	if err == nil || !strings.Contains(err.Error(), "has CPUs 3 but the StackInstance asks for 2 processes") ||
		!strings.Contains(err.Error(), `attachment "net1"`) {
		t.Fatalf("want every bad fact named, got %v", err)
	}
	if h.logged("starting process") {
		t.Error("a process was started despite invalid facts")
	}
	if _, err := os.Stat(filepath.Join(h.paths.ShimDir, podcontract.GenerationFile)); err == nil {
		t.Error("the generation moved although nothing started")
	}
}

func TestFStackModeIsResolvedFromTheSpec(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	h.writeDevinfo()
	s := h.supervisor("primary", "secondary")
	s.Cfg.Launch.Programs = nil
	err := waitResult(t, run(s, context.Background()))
	if err == nil || !strings.Contains(err.Error(), "no fstack built for shim mode kernel-event+multi-sc") {
		t.Fatalf("want the missing mode named, got %v", err)
	}
	mustDo(t, os.MkdirAll(filepath.Join(h.paths.ImageShimDir, "kernel-event+multi-sc"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(h.paths.ImageShimDir, "kernel-event+multi-sc", "fstack"), []byte("#!/bin/sh\nexit 9\n"), 0o755))
	s = h.supervisor("primary", "secondary")
	s.Cfg.Launch.Programs = nil
	err = waitResult(t, run(s, context.Background()))
	if err == nil || !strings.Contains(err.Error(), "process 0 died while starting (exit status 9)") ||
		!strings.HasSuffix(h.logLine("starting process", logging.KeyProcess, 0)["argv"], "kernel-event+multi-sc/fstack --conf "+h.paths.ConfigFile+" --proc-type=primary --proc-id=0") {
		t.Fatalf("want F-Stack's own command line for the mode's fstack, got %v\n%s", err, h.log)
	}
}

// TestProcessUpPerProcess: /metrics has a row a process, 1 while it runs and 0 once the
// dataplane stopped, so a dashboard shows each F-Stack process's state (a process missing from
// the scrape would read as "no data", not as "down").
func TestProcessUpPerProcess(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.writeDevinfo()
	s := h.supervisor("primary", "secondary")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := run(s, ctx)
	eventually(t, "the ready marker", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	_, body := get(t, s.handler(), podcontract.MetricsPath)
	for _, want := range []string{`fstack_process_up{process="0"} 1`, `fstack_process_up{process="1"} 1`, "fstack_processes_expected 2"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics while running lacks %q:\n%s", want, body)
		}
	}
	stop()
	if err := waitResult(t, res); err != nil {
		t.Fatal(err)
	}
	_, body = get(t, s.handler(), podcontract.MetricsPath)
	for _, want := range []string{`fstack_process_up{process="0"} 0`, `fstack_process_up{process="1"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics after the stop lacks %q:\n%s", want, body)
		}
	}
}
