package supervisor

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// fakeAgent stands in for fstack-probe-agent (tested on its own in dataplane-image/probe-agent):
// it speaks the agent's protocol, records its environment and every request, and answers by
// port: 80 passes, 81 is an HTTP 500 (or a NOT_SERVING gRPC service), 82 refuses, 83 answers
// late (3.2 s: past the probe's timeout and the 2 s after which an agent used to be killed), 84
// dies, 85 never answers (stuck in a shim call), 86 connects after 0.5 s (an app slow to
// accept). Its first start takes 1.2 s to attach, longer than a probe's timeout, as the real one
// took seconds: ready must wait for it.
const fakeAgent = `#!/bin/sh
env >"$0.env"
[ -e "$0.attached" ] || sleep 1.2
touch "$0.attached"
echo "ready kernel" >&3
while read -r kind addr port ms n; do
  [ "$kind" = ping ] && { echo pong >&3; continue; }
  echo "$kind $addr $port $ms" >>"$0.requests"
  [ "$kind" != tcp ] && [ "$n" -gt 0 ] && head -c "$n" >>"$0.requests"
  case "$kind $port" in
    "http 80") echo "ok 204" >&3 ;;
    "grpc 80") echo "ok SERVING" >&3 ;;
    "tcp 80") echo "ok connected" >&3 ;;
    "grpc 81") echo "fail health status NOT_SERVING" >&3 ;;
    *" 81") echo "ok 500" >&3 ;;
    *" 82") echo "fail connect: Connection refused" >&3 ;;
    *" 83") sleep 3.2; echo "fail late" >&3 ;;
    *" 84") exit 3 ;;
    *" 85") sleep 30 ;;
    *" 86") sleep 0.5; echo "ok connected" >&3 ;;
  esac
done
`

func appProbes(t *testing.T) string {
	t.Helper()
	get := func(port int32, path string, h ...podcontract.AppHeader) podcontract.AppProbe {
		return podcontract.AppProbe{Port: port, TimeoutSeconds: 1, HTTPGet: &podcontract.AppHTTPGet{Path: path, Headers: h}}
	}
	raw, err := json.Marshal(podcontract.AppProbes{
		"/app-probe/app/readiness": get(80, "/healthz?x=1", podcontract.AppHeader{Name: "host", Value: "www.test"}, podcontract.AppHeader{Name: "X-A", Value: "b"}),
		"/app-probe/app/liveness":  {Port: 80, TimeoutSeconds: 1},
		"/app-probe/app/startup":   get(81, "/"),
		"/app-probe/b/readiness":   {Port: 82, TimeoutSeconds: 1},
		"/app-probe/b/liveness":    {Port: 83, TimeoutSeconds: 1},
		"/app-probe/b/startup":     {Port: 84, TimeoutSeconds: 1},
		"/app-probe/d/liveness":    {Port: 85, TimeoutSeconds: 1},
		"/app-probe/c/readiness":   {Port: 80, TimeoutSeconds: 1, GRPC: &podcontract.AppGRPC{Service: "web"}},
		"/app-probe/c/liveness":    {Port: 81, TimeoutSeconds: 1, GRPC: &podcontract.AppGRPC{}},
	})
	mustDo(t, err)
	return string(raw)
}

func TestAppProbesThroughTheAgent(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.writeDevinfo()
	agentBin := filepath.Join(t.TempDir(), "agent")
	mustDo(t, os.WriteFile(agentBin, []byte(fakeAgent), 0o755))
	mode := AgentShimMode(&defaulted(t, vhostSpec(2)).Shim)
	lib := filepath.Join(h.paths.ImageShimDir, mode, podcontract.ShimLibrary)
	mustDo(t, os.MkdirAll(filepath.Dir(lib), 0o755))
	mustDo(t, copyFile(harmlessLibrary(t), lib))

	s := h.supervisor("primary", "secondary")
	s.Cfg.AppProbes, s.Cfg.ProbeAgent, s.Cfg.NodeIPs = appProbes(t), agentBin, testNode
	s.app = s.newProber()
	srv := s.handler()
	expect := func(path string, code int, body string) {
		t.Helper()
		if c, b := get(t, srv, path); c != code || !strings.Contains(b, body) {
			t.Errorf("%s = %d %q, want %d with %q", path, c, b, code, body)
		}
	}
	// Not ready: fail, so the kubelet's startup probe keeps waiting.
	expect("/app-probe/app/readiness", http.StatusServiceUnavailable, "not ready")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := run(s, ctx)
	eventually(t, "ready", s.health.ready.Load)
	expect("/app-probe/app/readiness", http.StatusOK, "GET /healthz?x=1 on port 80: HTTP 204")
	expect("/app-probe/app/liveness", http.StatusOK, "tcp port 80: connected")
	expect("/app-probe/app/startup", http.StatusServiceUnavailable, "HTTP 500") // the kubelet fails >= 400 too
	expect("/app-probe/b/readiness", http.StatusServiceUnavailable, "Connection refused")
	expect("/app-probe/nobody/readiness", http.StatusNotFound, "no app probe")
	expect("/app-probe/c/readiness", http.StatusOK, `grpc health of "web" on port 80: SERVING`)
	expect("/app-probe/c/liveness", http.StatusServiceUnavailable, "health status NOT_SERVING")

	env, _ := os.ReadFile(agentBin + ".env")
	for _, want := range []string{podcontract.EnvPreload + "=" + lib, podcontract.EnvShimInstances + "=2", podcontract.EnvShimProcID + "=0",
		podcontract.EnvShimInitialLcore + "=0x8"} { // CPU 3: the last process's, of the container's CPUs 2,3
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("agent environment lacks %s:\n%s", want, env)
		}
	}
	reqs, _ := os.ReadFile(agentBin + ".requests")
	for _, want := range []string{"GET /healthz?x=1 HTTP/1.1\r\nhost: www.test\r\nUser-Agent: kube-probe/fstack\r\nAccept: */*\r\nX-A: b\r\nConnection: close\r\n\r\n",
		"grpc 127.0.0.1 80 "} {
		if !strings.Contains(string(reqs), want) {
			t.Errorf("agent requests lack %q:\n%q", want, reqs)
		}
	}
	// Each request carries the time left of the probe's 1 s, less the margin for the answer.
	for _, m := range regexp.MustCompile(`(?m)^(?:http|tcp|grpc) 127\.0\.0\.1 80 (\d+)$`).FindAllStringSubmatch(string(reqs), -1) {
		if ms, _ := strconv.Atoi(m[1]); ms <= 0 || ms > 900 {
			t.Errorf("request %q: timeout %d ms, want within the probe's 900 ms", m[0], ms)
		}
	}

	// A late answer is not a stuck agent: the probe fails, the agent lives on and answers the
	// next probe once it has finished (no kill, no leaked context).
	first := s.app.Agent().PID()
	expect("/app-probe/b/liveness", http.StatusServiceUnavailable, "no answer from the probe agent within the probe's timeout")
	eventually(t, "the agent answering again", func() bool { c, _ := get(t, srv, "/app-probe/app/liveness"); return c == http.StatusOK })
	if pid := s.app.Agent().PID(); pid != first {
		t.Errorf("the agent was replaced (pid %d, was %d) after a late answer", pid, first)
	}
	// One that answers neither its probe nor the liveness ping after it is killed once
	// stuckAfter passes; a dead one is replaced; the next probe gets a fresh agent either way.
	s.app.Agent().StuckAfter = 100 * time.Millisecond
	expect("/app-probe/d/liveness", http.StatusServiceUnavailable, "no answer from the probe agent within the probe's timeout")
	expect("/app-probe/app/liveness", http.StatusServiceUnavailable, "stopped answering, even its liveness ping, and was killed")
	expect("/app-probe/app/liveness", http.StatusOK, "connected")
	expect("/app-probe/b/startup", http.StatusServiceUnavailable, "exited without answering")
	expect("/app-probe/app/liveness", http.StatusOK, "connected")
	m := h.metricsText(s)
	for _, want := range []string{"fstack_probe_agent_starts_total 3", "fstack_probe_agent_kills_total 1", "fstack_probe_agent_starts_exhausted 0"} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}

	stop()
	if err := waitResult(t, done); err != nil {
		t.Fatal(err)
	}
	kills := 0
	for _, l := range h.logLines() {
		if strings.Contains(l["msg"], "killing it") && l[logging.KeyProgram] == "fstack-probe-agent" && l[logging.KeyPID] != "" {
			kills++
		}
	}
	if kills != 1 {
		t.Errorf("want exactly one agent killed (the stuck one):\n%s", h.log)
	}
	for _, w := range []struct {
		msg string
		kv  []any
	}{
		{"app probes performed by the probe agent through F-Stack", []any{"probes", 9, logging.KeyProgram, "fstack-probe-agent", "binary", agentBin, "cpu", 3}},
		{"probe agent exited", []any{"status", "exit status 0", logging.KeyPID, ""}},
		{"app probe: connect: Connection refused", []any{"path", "/app-probe/b/readiness"}},
	} {
		if !h.logged(w.msg, w.kv...) {
			t.Errorf("log lacks %q with %v:\n%s", w.msg, w.kv, h.log)
		}
	}
	expect("/app-probe/app/liveness", http.StatusServiceUnavailable, "not ready")
}

// With its starts used up, the dataplane's liveness fails, naming why: the kubelet restarts it
// (an event), which brings fresh zones and a fresh budget.
func TestAgentOutOfStartsFailsHealth(t *testing.T) {
	s := New(Config{}, nil, io.Discard)
	s.agentOutOfStarts("the probe agent was started 5 times")
	if c, b := get(t, s.handler(), podcontract.HealthzPath); c != http.StatusServiceUnavailable || !strings.Contains(b, "started 5 times") {
		t.Fatalf("/healthz = %d %q, want 503 naming the agent", c, b)
	}
}

func TestAppProbesUnreadable(t *testing.T) {
	s := New(Config{AppProbes: `{"/app-probe/a/readiness":{"port":80,"httpGet":{"path":"/\r\nX: y"},"timeoutSeconds":1}}`, NodeIPs: testNode}, nil, io.Discard)
	s.health.ready.Store(true)
	if c, b := get(t, s.handler(), "/app-probe/a/readiness"); c != http.StatusServiceUnavailable || !strings.Contains(b, podcontract.EnvAppProbes) {
		t.Fatalf("a hostile probe was not refused: %d %q", c, b)
	}
}

func TestAgentShimMode(t *testing.T) {
	tr, f := true, false
	for _, c := range []struct {
		ke, msc  *bool
		ts, poll bool
		want     string
	}{
		{&tr, &tr, false, false, "kernel-event"},
		{&f, &tr, false, true, "pipeline"},
		{&f, &f, true, false, "thread-socket"},
		{&tr, &f, false, false, "kernel-event"},
	} {
		sh := defaulted(t, vhostSpec(1)).Shim
		sh.KernelEvent, sh.MultiSC, sh.ThreadSocket, sh.Polling = c.ke, c.msc, c.ts, c.poll
		if got := AgentShimMode(&sh); got != c.want {
			t.Errorf("%+v: %s, want %s", c, got, c.want)
		}
	}
}

// harmlessLibrary is a library the fake agent can preload for real: the C library it already uses.
func harmlessLibrary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("no libc.so.6 in the usual places to preload into the fake agent")
	return ""
}
