// Package probeagent tests fstack-probe-agent.c, the C program the supervisor asks to perform app
// probes through F-Stack. F-Stack itself cannot run here: the agent runs on kernel sockets, and
// under the stand-in shim (dataplane-image/standin/shim), which keeps the app's listener off the
// pod IP as F-Stack does.
package agenttest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// agentSources are the agent's C files.
var agentSources = []string{"../fstack-probe-agent.c", "../grpc-health.c", "../sockio.c"}

// build compiles a C source of this directory (or the stand-in shim) into dir.
func build(t *testing.T, dir, out string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatal("gcc is needed to build the probe agent: hack/install-deps.sh installs it (build-essential)")
	}
	bin := filepath.Join(dir, out)
	cmd := exec.Command("gcc", append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-o", bin}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
	return bin
}

// agent is a running fstack-probe-agent with its request pipe and reply fd.
type agent struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	replies *bufio.Reader
	ready   string
}

func startAgent(t *testing.T, bin string, env ...string) *agent {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	a := &agent{cmd: cmd, in: in, replies: bufio.NewReader(r)}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait(); r.Close() })
	a.ready = a.read(t)
	return a
}

func (a *agent) read(t *testing.T) string {
	t.Helper()
	line, err := a.replies.ReadString('\n')
	if err != nil {
		t.Fatalf("agent reply: %v (so far %q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

func (a *agent) ask(t *testing.T, req string) string {
	t.Helper()
	if _, err := io.WriteString(a.in, req); err != nil {
		t.Fatal(err)
	}
	return a.read(t)
}

func httpReq(addr string, port, timeoutMs int, path string) string {
	raw := "GET " + path + " HTTP/1.1\r\nHost: probe.test\r\nConnection: close\r\n\r\n"
	return fmt.Sprintf("http %s %d %d %d\n%s", addr, port, timeoutMs, len(raw), raw)
}

// statusServer answers every request with code (in Go: the agent's client side is what is tested).
func statusServer(t *testing.T, code int) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				if line == "" {
					return // a tcp probe: connect and close
				}
				answer := code
				if !strings.HasPrefix(line, "GET /probe HTTP/1.1") {
					answer = 400
				}
				fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n", answer)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// silentServer accepts and never answers.
func silentServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	t.Cleanup(func() {
		ln.Close()
		for len(held) > 0 {
			(<-held).Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestAgentAnswersEachRequest(t *testing.T) {
	dir := t.TempDir()
	a := startAgent(t, build(t, dir, "agent", agentSources...))
	if a.ready != "ready kernel" {
		t.Fatalf("first line %q, want \"ready kernel\" (no shim: kernel sockets)", a.ready)
	}
	ok, down, silent, closed := statusServer(t, 204), statusServer(t, 503), silentServer(t), freePort(t)
	for _, c := range []struct{ req, want string }{
		{fmt.Sprintf("tcp 127.0.0.1 %d 2000\n", ok), "ok connected"},
		{fmt.Sprintf("tcp 127.0.0.1 %d 2000\n", closed), "fail connect: Connection refused"},
		{httpReq("127.0.0.1", ok, 2000, "/probe"), "ok 204"},
		{httpReq("127.0.0.1", down, 2000, "/probe"), "ok 503"},
		{httpReq("127.0.0.1", closed, 2000, "/probe"), "fail connect: Connection refused"},
		{httpReq("127.0.0.1", silent, 200, "/probe"), "fail timed out waiting for the response"},
		{httpReq("::1", ok, 2000, "/probe"), "fail connect:"}, // the servers listen on IPv4 only
		{"tcp nowhere 80 100\n", "fail bad address or port"},
		{fmt.Sprintf("tcp 127.0.0.1 %d 2000\n", ok), "ok connected"}, // still serving after failures
	} {
		if got := a.ask(t, c.req); !strings.HasPrefix(got, c.want) {
			t.Errorf("%q: got %q, want %q", strings.SplitN(c.req, "\n", 2)[0], got, c.want)
		}
	}
	// The supervisor's liveness ping is answered between probes.
	if got := a.ask(t, "ping\n"); got != "pong" {
		t.Fatalf("ping: got %q, want pong", got)
	}
	// A line it cannot parse ends it: the supervisor starts another.
	if got := a.ask(t, "pong\n"); got != "fail bad request line" {
		t.Fatalf("bad line: got %q", got)
	}
	if err := a.cmd.Wait(); err == nil {
		t.Fatal("the agent kept running after a bad request line")
	}
}

// TestStandinShimLeavesOnlyTheAgentAPath runs an app under the stand-in shim: its wildcard
// listener moves to loopback, so a client outside the pod (here: the host's own non-loopback
// address) is refused, while the agent, inside, reaches it at 127.0.0.1.
func TestStandinShimLeavesOnlyTheAgentAPath(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "libff_syscall.so")
	if b, err := exec.Command("../../standin/shim/build.sh", shim).CombinedOutput(); err != nil {
		t.Fatalf("stand-in shim: %v\n%s", err, b)
	}
	server := exec.Command(build(t, dir, "server", "testdata/server.c"), "200")
	server.Env = append(os.Environ(), podcontract.EnvPreload+"="+shim)
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// A file, not a buffer: the server writes it while the test reads it.
	stderr, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	server.Stderr = stderr
	logged := func() string { b, _ := os.ReadFile(stderr.Name()); return string(b) }
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	var addr string
	var port int
	if _, err := fmt.Fscan(bufio.NewReader(out), &addr, &port); err != nil {
		t.Fatalf("server address: %v (stderr %q)", err, logged())
	}
	if addr != "127.0.0.1" {
		t.Fatalf("under the stand-in shim the wildcard listener is on %s, want 127.0.0.1", addr)
	}
	if ip := hostAddr(t); ip != "" {
		c, err := net.Dial("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
		if err == nil {
			c.Close()
			t.Fatalf("the app answered on %s:%d: the stand-in must leave it no listener off loopback", ip, port)
		}
	}
	a := startAgent(t, build(t, dir, "agent", agentSources...), podcontract.EnvPreload+"="+shim)
	if got := a.ask(t, httpReq("127.0.0.1", port, 2000, "/")); got != "ok 200" {
		t.Fatalf("the agent under the stand-in shim: %q, want \"ok 200\"", got)
	}
	// A closed port: F-Stack drops the SYN (the stand-in's blackhole.c), so no refusal ever
	// comes. The agent answers within the probe's timeout that the app gave none, and still
	// answers its liveness ping: it is not stuck.
	closed := freePort(t)
	if got := a.ask(t, fmt.Sprintf("tcp 127.0.0.1 %d 300\n", closed)); !strings.HasPrefix(got, "fail connect: no answer from the app within the probe's timeout") {
		t.Fatalf("a closed port under the stand-in shim: %q, want no answer from the app", got)
	}
	if got := a.ask(t, "ping\n"); got != "pong" {
		t.Fatalf("ping after a closed port: %q, want pong", got)
	}
	if !strings.Contains(logged(), "stand-in libff_syscall.so (not F-Stack)") {
		t.Fatalf("the stand-in did not say what it is: %q", logged())
	}
}

// hostAddr is one of this machine's non-loopback IPv4 addresses, or "".
func hostAddr(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}
