package supervisor

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// testNode is the node's address in the handler tests: httptest's requests come from it.
const testNode = "192.0.2.1"

func getFrom(t *testing.T, h http.Handler, remote, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = remote
	h.ServeHTTP(rec, r)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// /app-probe makes the app accept a connection through F-Stack at each call, so only the
// kubelet's addresses get it: the node's (status.hostIPs, routed CNIs) and the pod's default
// gateway (bridge CNIs). Another pod, the pod itself and a route's other gateway get 403.
func TestAppProbeAnswersTheNodeOnly(t *testing.T) {
	dir := t.TempDir()
	v4, v6 := filepath.Join(dir, "route"), filepath.Join(dir, "ipv6_route")
	// What the pod's /proc/net/route shows on a bridge CNI: a default route via 10.244.0.1 on
	// eth0, the pod subnet, and a route via another gateway that is not a default one.
	mustDo(t, os.WriteFile(v4, []byte("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"+
		"eth0\t00000000\t0100F40A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"+
		"eth0\t0000F40A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"+
		"eth0\t0000000A\t0909090A\t0003\t0\t0\t0\t000000FF\t0\t0\t0\n"), 0o644))
	mustDo(t, os.WriteFile(v6, []byte(
		"00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n"+
			"fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n"), 0o644))
	s := New(Config{AppProbes: `{"/app-probe/a/readiness":{"port":80,"timeoutSeconds":1}}`,
		NodeIPs: testNode + ",2001:db8::1", Paths: facts.Paths{ShimDir: dir, RouteV4: v4, RouteV6: v6}}, nil, io.Discard)
	s.health.ready.Store(true)
	h := s.handler()
	for _, remote := range []string{testNode + ":40000", "[2001:db8::1]:40000", "10.244.0.1:40000", "[fd00::1]:40000", "[::ffff:192.0.2.1]:40000"} {
		// No agent runs here: a caller that is let in gets the probe's own failure.
		if c, b := getFrom(t, h, remote, "/app-probe/a/readiness"); c != http.StatusServiceUnavailable || !strings.Contains(b, "probe agent is not running") {
			t.Errorf("from %s (the node) = %d %q, want the probe performed", remote, c, b)
		}
	}
	for _, remote := range []string{"10.244.0.7:40000", "10.9.9.9:40000", "127.0.0.1:40000", "[fd00::7]:40000", "garbage"} {
		if c, b := getFrom(t, h, remote, "/app-probe/a/readiness"); c != http.StatusForbidden || !strings.Contains(b, "node only") {
			t.Errorf("from %s (not the node) = %d %q, want 403", remote, c, b)
		}
	}
	// The dataplane's own probes and metrics do no work in the app: every caller gets them.
	if c, _ := getFrom(t, h, "10.244.0.7:40000", podcontract.ReadyzPath); c != http.StatusOK {
		t.Errorf("/readyz from another pod = %d, want 200", c)
	}
}

// A flood of callers of the probe the kubelet uses (here from the node, which /app-probe lets in)
// shares one probe with it: the kubelet's probe is answered, not queued behind 200 others until
// its timeout (which made the kubelet restart the app). The app takes 0.5 s to accept.
func TestConcurrentCallersShareOneProbe(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agent")
	mustDo(t, os.WriteFile(bin, []byte(fakeAgent), 0o755))
	s := New(Config{AppProbes: `{"/app-probe/app/liveness":{"port":86,"timeoutSeconds":5}}`, NodeIPs: testNode,
		Paths: facts.Paths{ShimDir: t.TempDir()}}, nil, io.Discard)
	s.health.ready.Store(true)
	t.Cleanup(s.app.Stop)
	if err := s.app.Start(context.Background(), bin, nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	h := s.handler()
	const callers = 200
	var wg sync.WaitGroup
	var calls, failed atomic.Int64
	stop := make(chan struct{})
	for range callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c, _ := get(t, h, "/app-probe/app/liveness"); c != http.StatusOK {
					failed.Add(1)
				}
				calls.Add(1)
			}
		})
	}
	// The kubelet's comes once the flood is probing the app, as it did on a node under attack.
	eventually(t, "the flood's first probe", func() bool { _, err := os.Stat(bin + ".requests"); return err == nil })
	c, b := get(t, h, "/app-probe/app/liveness")
	close(stop)
	wg.Wait()
	if c != http.StatusOK {
		t.Errorf("the kubelet's probe among %d callers = %d %q, want 200", callers, c, b)
	}
	if failed.Load() > 0 {
		t.Errorf("%d of %d calls of the flood failed", failed.Load(), calls.Load())
	}
	reqs, _ := os.ReadFile(bin + ".requests")
	if n := int64(strings.Count(string(reqs), "tcp 127.0.0.1 86 ")); n == 0 || n >= calls.Load() {
		t.Errorf("the app was probed %d times for %d calls, want the callers to share probes", n, calls.Load()+1)
	}
}

// serve runs s's HTTP server on a loopback port with lim and returns its address.
func serve(t *testing.T, s *Supervisor, lim httpLimits) string {
	t.Helper()
	s.httpLimits = lim
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustDo(t, err)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	mustDo(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// request sends one keep-alive GET on c and reads the answer.
func request(c net.Conn, br *bufio.Reader, path string) (int, error) {
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: pod\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// hangGuard bounds a read that must end because the server closes the connection: reaching it
// means the connection stayed open (the assertion is on closed, not on how soon).
const hangGuard = 30 * time.Second

// closedByServer reads c until the server closes it; false if it was still open at hangGuard.
func closedByServer(t *testing.T, c net.Conn, br *bufio.Reader) bool {
	t.Helper()
	mustDo(t, c.SetReadDeadline(time.Now().Add(hangGuard)))
	_, err := br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// An idle keep-alive connection and one that never sends a request are closed by the server
// (5000 of them stayed open on :9180).
func TestIdleConnectionsAreClosed(t *testing.T) {
	s := New(Config{}, nil, io.Discard)
	addr := serve(t, s, httpLimits{readHeader: 200 * time.Millisecond, idle: 200 * time.Millisecond, conns: 8, nodeConns: 1})
	kept := dialFrom(t, "127.0.0.1", addr)
	br := bufio.NewReader(kept)
	if code, err := request(kept, br, podcontract.HealthzPath); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz = %d %v", code, err)
	}
	if !closedByServer(t, kept, br) {
		t.Errorf("an idle keep-alive connection was still open after %s", hangGuard)
	}
	silent := dialFrom(t, "127.0.0.1", addr)
	if !closedByServer(t, silent, bufio.NewReader(silent)) {
		t.Errorf("a connection that sent nothing was still open after %s", hangGuard)
	}
}

// Past the cap, other callers' connections are closed at once, while the node still gets in
// (up to its own reserve); a connection that ends gives its place back.
func TestConnectionCap(t *testing.T) {
	s := New(Config{NodeIPs: "127.0.0.2"}, nil, io.Discard)
	addr := serve(t, s, httpLimits{readHeader: time.Minute, idle: time.Minute, conns: 2, nodeConns: 1})
	holders := []net.Conn{dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr)}
	over := dialFrom(t, "127.0.0.1", addr)
	if !closedByServer(t, over, bufio.NewReader(over)) {
		t.Fatalf("a third connection from another pod was served over a cap of 2")
	}
	node := dialFrom(t, "127.0.0.2", addr)
	if code, err := request(node, bufio.NewReader(node), podcontract.HealthzPath); err != nil || code != http.StatusOK {
		t.Fatalf("the node's connection past the others' cap: /healthz = %d %v, want 200", code, err)
	}
	node2 := dialFrom(t, "127.0.0.2", addr)
	if !closedByServer(t, node2, bufio.NewReader(node2)) {
		t.Errorf("a second node connection was served over a node reserve of 1")
	}
	_ = holders[0].Close()
	deadline := time.Now().Add(hangGuard)
	for {
		c := dialFrom(t, "127.0.0.1", addr)
		mustDo(t, c.SetDeadline(time.Now().Add(hangGuard)))
		if code, err := request(c, bufio.NewReader(c), podcontract.HealthzPath); err == nil && code == http.StatusOK {
			break
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("no place was given back after a connection closed")
		}
	}
}

// /status and /config say what the pod runs (its addresses, its tuning, why it failed): any pod
// can reach port 9180, so they answer only the node and the holders of the pod's status token
// (the operator, kubectl fstack through the API server's pod proxy). The probes and /metrics
// stay every caller's.
func TestStatusAndConfigAnswerTheNodeAndTheTokenOnly(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.writeDevinfo()
	s := h.supervisor("primary", "secondary")
	s.Cfg.NodeIPs = testNode
	if _, _, err := s.render(); err != nil {
		t.Fatal(err)
	}
	s.health.ready.Store(true)
	hh := s.handler()
	const pod = "10.244.0.7:40000"
	for _, path := range []string{podcontract.StatusPath, podcontract.ConfigPath} {
		for name, token := range map[string]string{"no token": "", "a wrong token": strings.Repeat("f", len(testToken)),
			"a prefix of the token": testToken[:len(testToken)-1], "the token and more": testToken + "0"} {
			if c, b := getWith(t, hh, pod, token, path); c != http.StatusForbidden || !strings.Contains(b, podcontract.StatusTokenHeader) {
				t.Errorf("%s from another pod with %s = %d %q, want 403 naming the header", path, name, c, b)
			}
		}
		if c, b := getWith(t, hh, pod, testToken, path); c != http.StatusOK {
			t.Errorf("%s with the token = %d %q, want 200", path, c, b)
		}
		if c, b := getWith(t, hh, testNode+":40000", "", path); c != http.StatusOK {
			t.Errorf("%s from the node = %d %q, want 200", path, c, b)
		}
	}
	for _, path := range []string{podcontract.ReadyzPath, podcontract.HealthzPath, podcontract.StartedzPath, podcontract.MetricsPath} {
		if c, b := getWith(t, hh, pod, "", path); c == http.StatusForbidden {
			t.Errorf("%s from another pod = 403 %q: the probes and metrics are every caller's", path, b)
		}
	}
	// A pod an older injector made has no token: only the node is answered, whatever is sent.
	s.Cfg.StatusToken = ""
	for _, token := range []string{"", testToken} {
		if c, _ := getWith(t, hh, pod, token, podcontract.StatusPath); c != http.StatusForbidden {
			t.Errorf("/status of a supervisor without a token, from another pod with %q = %d, want 403", token, c)
		}
	}
	if c, _ := getWith(t, hh, testNode+":40000", "", podcontract.StatusPath); c != http.StatusOK {
		t.Errorf("/status of a supervisor without a token, from the node = %d, want 200", c)
	}
}

// getWith asks path from remote, sending token in the status token header when it is not empty.
func getWith(t *testing.T, h http.Handler, remote, token, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = remote
	if token != "" {
		r.Header.Set(podcontract.StatusTokenHeader, token)
	}
	h.ServeHTTP(rec, r)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}
