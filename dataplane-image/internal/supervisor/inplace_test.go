package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// runInPlace starts RunInPlace in the background.
func runInPlace(s *Supervisor, ctx context.Context) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.RunInPlace(ctx) }()
	return ch
}

// primaryPids are the pids of process 0 in the order the generations brought them up.
func (h *harness) primaryPids() []int {
	var pids []int
	for _, l := range h.logLines() {
		if strings.Contains(l["msg"], "process is up") && l[logging.KeyProcess] == "0" {
			pid, _ := strconv.Atoi(l[logging.KeyPID])
			pids = append(pids, pid)
		}
	}
	return pids
}

// Three kill -9 of the primary within seconds (the three faults within two minutes):
// each ends its generation and the supervisor starts the next one in place, ready again, and
// keeps running; a stop still returns nil. On main Run returned the first death as an error
// and fstack-supervisor exited with it.
func TestPrimaryKilledThreeTimesRestartsInPlace(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.writeDevinfo()
	s := h.supervisor("primary", "secondary")
	s.Cfg.Restarts = RestartBudget{Max: 10, Window: 10 * time.Minute}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := runInPlace(s, ctx)
	for gen := 1; gen <= 4; gen++ {
		eventually(t, fmt.Sprintf("generation %d ready", gen), func() bool { return h.shimFile(podcontract.ReadyFile) == strconv.Itoa(gen) })
		if gen == 4 {
			break
		}
		var pids []int
		eventually(t, "the primary's pid in the log", func() bool { pids = h.primaryPids(); return len(pids) == gen })
		mustDo(t, syscall.Kill(pids[gen-1], syscall.SIGKILL))
		eventually(t, "the death noticed", func() bool {
			return h.shimFile(podcontract.GenerationFile) != strconv.Itoa(gen) || h.shimFile(podcontract.ReadyFile) == ""
		})
		select {
		case err := <-res:
			t.Fatalf("the supervisor returned after kill %d: %v", gen, err)
		default:
		}
	}
	if !h.logged("restarting the dataplane in place", "reason", podcontract.DataplaneRestartProcessExit, "restarts", 3) {
		t.Errorf("no log line per restart naming the reason and the count:\n%s", h.log)
	}
	m := h.metricsText(s)
	for _, want := range []string{`fstack_dataplane_restarts_total{reason="process_exit"} 3`, `fstack_dataplane_restarts_total{reason="container"} 0`, "fstack_dataplane_generation 4"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	st := decodeStatus(t, s)
	if st.Generation != 4 || !st.Ready || st.Restarts.Dataplane.Total != 3 || st.Restarts.Dataplane.ByReason[podcontract.DataplaneRestartProcessExit] != 3 ||
		st.Restarts.Dataplane.Last == nil || !strings.Contains(st.Restarts.Dataplane.Last.Message, "F-Stack process 0 (primary) exited: killed by signal killed") {
		t.Errorf("/status: %+v", st)
	}
	if code, _ := get(t, s.handler(), podcontract.HealthzPath); code != http.StatusOK {
		t.Errorf("/healthz %d after restarts in place: the kubelet would restart the container", code)
	}
	stop()
	if err := waitResult(t, res); err != nil {
		t.Fatalf("a stop after restarts in place returned %v, want nil", err)
	}
}

// A secondary that dies at every start is a crash loop: with a budget of 2 the supervisor starts
// generations 2 and 3 in place, and when 3 dies too it returns an error saying so (the kubelet's
// back-off then spaces the tries).
func TestCrashLoopSpendsTheBudgetAndExits(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.writeDevinfo()
	s := h.supervisor("primary", "secondary-dies")
	s.Cfg.Restarts = RestartBudget{Max: 2, Window: time.Hour}
	err := waitResult(t, runInPlace(s, context.Background()))
	if err == nil || !strings.Contains(err.Error(), "crash loop: 2 restarts in place within 1h0m0s") || !strings.Contains(err.Error(), "F-Stack process 1 (secondary) exited") {
		t.Fatalf("RunInPlace returned %v, want the crash loop naming the last death", err)
	}
	if g := h.shimFile(podcontract.GenerationFile); g != "3" {
		t.Errorf("generation %q, want 3 (two in place)", g)
	}
	if code, _ := get(t, s.handler(), podcontract.HealthzPath); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz %d once the budget is spent, want 503", code)
	}
}

// Restarts older than the window no longer count: the budget is a rate, not a lifetime total.
func TestRestartBudgetForgetsOldRestarts(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	s := h.supervisor("primary", "secondary")
	s.Cfg.Restarts = RestartBudget{Max: 1, Window: time.Minute}
	now := time.Unix(1000, 0)
	s.Now = func() time.Time { return now }
	if over := s.spendRestart(podcontract.DataplaneRestartProcessExit, "a"); over != "" {
		t.Fatal(over)
	}
	if over := s.spendRestart(podcontract.DataplaneRestartProcessExit, "b"); over == "" {
		t.Fatal("a second restart within the window passed a budget of 1")
	}
	now = now.Add(61 * time.Second)
	if over := s.spendRestart(podcontract.DataplaneRestartPortDown, "c"); over != "" {
		t.Fatalf("a restart after the window: %s", over)
	}
}

// What a new generation cannot fix still ends the supervisor at once: a setup error (here the
// attachment's device info is missing) and a first generation that never started.
func TestWhatCannotRecoverInPlaceExits(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	s := h.supervisor("primary", "secondary")
	s.Cfg.Restarts = RestartBudget{Max: 10, Window: time.Hour}
	if err := waitResult(t, runInPlace(s, context.Background())); err == nil {
		t.Fatal("a pod without its device info ran")
	}
	h2 := newHarness(t, vhostSpec(2))
	h2.writeDevinfo()
	s2 := h2.supervisor("primary-dies", "secondary")
	s2.Cfg.Restarts = RestartBudget{Max: 10, Window: time.Hour}
	err := waitResult(t, runInPlace(s2, context.Background()))
	if err == nil || !strings.Contains(err.Error(), "process 0 died while starting") {
		t.Fatalf("got %v", err)
	}
	for _, hh := range []*harness{h, h2} {
		if hh.logged("restarting the dataplane in place") {
			t.Errorf("restarted in place what cannot recover:\n%s", hh.log)
		}
	}
	if g := h2.shimFile(podcontract.GenerationFile); g != "1" {
		t.Errorf("generation %q, want 1", g)
	}
}

// A generation that fails to start after an earlier one served is retried in place (what the
// previous generation left behind is the likely cause), and counted as start_failed.
func TestStartFailureAfterServingIsRetriedInPlace(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	s := h.supervisor("primary", "secondary")
	s.served = true
	if r := s.restartReason(startError(errors.New("process 0 died while starting (exit status 1)"))); r != podcontract.DataplaneRestartStartFailed {
		t.Errorf("reason %q, want start_failed", r)
	}
	if r := s.restartReason(startError(&cannotExec{errors.New("start process 0 (/x): no such file")})); r != "" {
		t.Errorf("a binary that cannot run is restarted in place (%q)", r)
	}
	s.served = false
	if r := s.restartReason(startError(errors.New("process 0 died while starting"))); r != "" {
		t.Errorf("a first generation's failed start is restarted in place (%q)", r)
	}
	if r := s.restartReason(ErrRestartRequested); r != podcontract.DataplaneRestartContexts {
		t.Errorf("a request for contexts: reason %q", r)
	}
}

func decodeStatus(t *testing.T, s *Supervisor) podcontract.Status {
	t.Helper()
	code, body := get(t, s.handler(), podcontract.StatusPath)
	if code != http.StatusOK {
		t.Fatalf("/status %d: %s", code, body)
	}
	var st podcontract.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/status is not the contract's JSON: %v\n%s", err, body)
	}
	return st
}

// /status speaks the contract the CLI decodes, key by key; the launchers' records are read as
// hostile input: a reason outside the set counts as other, a symlink or an oversized record is
// left out (and the rest still answered), a message is made printable.
func TestStatusJSON(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	s := h.supervisor("primary", "secondary")
	mustDo(t, os.MkdirAll(h.paths.ShimDir, 0o755))
	mustDo(t, os.WriteFile(filepath.Join(h.paths.ShimDir, podcontract.GenerationFile), []byte("3\n"), 0o644))
	s.health.ready.Store(true)
	s.health.set("ready")
	s.spendRestartForTest(podcontract.DataplaneRestartProcessExit, "F-Stack process 0 (primary) exited: signal: killed")
	mustDo(t, podcontract.WriteAppRestarts(filepath.Join(h.paths.AppStateDir, "nginx"), func() *podcontract.Restarts {
		r := &podcontract.Restarts{}
		r.Add(podcontract.AppRestartExited, "nginx exited: exit status 1", time.Unix(2000, 0))
		return r
	}()))
	for name, content := range map[string]string{
		"odd": `{"total":9,"byReason":{"made-up":5,"exited":-3},"last":{"reason":"made-up","message":"a\u001b[31mb","time":"2026-01-01T00:00:00Z"}}`,
		"big": strings.Repeat(" ", podcontract.AppRestartsMax+10) + "{}",
	} {
		mustDo(t, os.MkdirAll(filepath.Join(h.paths.AppStateDir, name), 0o755))
		mustDo(t, os.WriteFile(filepath.Join(h.paths.AppStateDir, name, podcontract.AppRestartsFile), []byte(content), 0o644))
	}
	mustDo(t, os.MkdirAll(filepath.Join(h.paths.AppStateDir, "link"), 0o755))
	mustDo(t, os.Symlink("/etc/hostname", filepath.Join(h.paths.AppStateDir, "link", podcontract.AppRestartsFile)))
	down := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.SetPorts([]podcontract.PortStatus{{Port: 0, Attachment: "net1", LinkUp: false, DownSince: &down}})

	code, body := get(t, s.handler(), podcontract.StatusPath)
	if code != http.StatusOK {
		t.Fatalf("/status %d: %s", code, body)
	}
	var raw map[string]any
	mustDo(t, json.Unmarshal([]byte(body), &raw))
	for _, key := range []string{"generation", "ready", "reason", "restarts", "ports"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("/status lacks %q: %s", key, body)
		}
	}
	for _, want := range []string{`"generation":3`, `"ready":true`, `"reason":"ready"`,
		`"dataplane":{"total":1,"byReason":{"process_exit":1},"last":{"reason":"process_exit","message":"F-Stack process 0 (primary) exited: signal: killed","time":"`,
		`"nginx":{"total":1,"byReason":{"exited":1},"last":{"reason":"exited","message":"nginx exited: exit status 1","time":"1970-01-01T00:33:20Z"}}`,
		`"odd":{"total":5,"byReason":{"other":5},"last":{"reason":"other","message":"a [31mb"`,
		`"ports":[{"port":0,"attachment":"net1","linkUp":false,"downSince":"2026-01-02T03:04:05Z"}]`} {
		if !strings.Contains(body, want) {
			t.Errorf("/status lacks %s:\n%s", want, body)
		}
	}
	for _, left := range []string{`"big"`, `"link"`} {
		if strings.Contains(body, left) {
			t.Errorf("/status answers the unreadable record %s:\n%s", left, body)
		}
	}
	m := h.metricsText(s)
	for _, want := range []string{`fstack_app_restarts_total{container="nginx"reason="exited"} 1`, `fstack_app_restarts_total{container="odd"reason="other"} 5`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}
	// Ports stay an empty list, not null, until the link watch sets them.
	s.SetPorts(nil)
	if _, body := get(t, s.handler(), podcontract.StatusPath); !strings.Contains(body, `"ports":[]`) {
		t.Errorf("no ports: %s", body)
	}
}

// spendRestartForTest records a restart as RunInPlace does.
func (s *Supervisor) spendRestartForTest(reason, msg string) {
	if s.Cfg.Restarts.Max == 0 {
		s.Cfg.Restarts = RestartBudget{Max: 10, Window: time.Hour}
	}
	if over := s.spendRestart(reason, msg); over != "" {
		panic(over)
	}
}
