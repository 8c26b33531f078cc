package telemetry

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// self accepts the test process, where the fake servers run.
var self = ProcessOf(os.Getpid())

// fakeServer answers like DPDK's telemetry: a greeting, then one reply packet per request. It
// is a fake because the unit tier runs without DPDK; the dataplane tier checks the client
// against a real testpmd.
func fakeServer(t *testing.T, replies map[string]string) string {
	t.Helper()
	return hostileServer(t, greeting(16384), func(req string) []byte {
		reply, ok := replies[req]
		if !ok {
			name, _, _ := strings.Cut(req, ",")
			reply = `{"` + name + `": null}`
		}
		return []byte(reply)
	})
}

func TestAllEthdevStats(t *testing.T) {
	path := fakeServer(t, map[string]string{
		"/ethdev/list":    `{"/ethdev/list": [0, 1]}`,
		"/ethdev/stats,0": `{"/ethdev/stats": {"ipackets": 12, "opackets": 7, "ibytes": 1200, "obytes": 700, "imissed": 0, "ierrors": 1, "oerrors": 0, "rx_nombuf": 0, "q_ipackets": [12, 0]}}`,
		"/ethdev/stats,1": `{"/ethdev/stats": {"ipackets": 3, "opackets": 0}}`,
	})
	ports, err := AllEthdevStats(path, time.Second, self)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 2 || ports[0].Port != 0 || ports[1].Port != 1 {
		t.Fatalf("ports = %+v", ports)
	}
	if got := ports[0].Stats; got["ipackets"] != 12 || got["obytes"] != 700 || got["ierrors"] != 1 {
		t.Errorf("port 0 stats = %v", got)
	}
	if _, ok := ports[0].Stats["q_ipackets"]; ok {
		t.Error("per-queue arrays must be left out of the scalar counters")
	}
	if ports[1].Stats["ipackets"] != 3 {
		t.Errorf("port 1 stats = %v", ports[1].Stats)
	}
}

func TestGreeting(t *testing.T) {
	c, err := Dial(fakeServer(t, nil), time.Second, self)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Greeting.PID != os.Getpid() || !strings.HasPrefix(c.Greeting.Version, "DPDK") || c.Peer.Pid != int32(os.Getpid()) {
		t.Errorf("greeting = %+v", c.Greeting)
	}
}

func TestUnknownCommandIsAnError(t *testing.T) {
	c, err := Dial(fakeServer(t, nil), time.Second, self)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.EthdevStats(9); err == nil || !strings.Contains(err.Error(), "null reply") {
		t.Fatalf("want a null-reply error, got %v", err)
	}
}

func TestNoServer(t *testing.T) {
	_, err := Dial(filepath.Join(t.TempDir(), SocketName), time.Second, self)
	if err == nil {
		t.Fatal("dial of a missing socket succeeded")
	}
}

func TestSilentServerTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), SocketName)
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	if _, err := Dial(path, 200*time.Millisecond, self); err == nil {
		t.Fatal("a server that never greets must fail the dial")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the timeout was not applied")
	}
}

func TestEthdevStarted(t *testing.T) {
	path := fakeServer(t, map[string]string{
		"/ethdev/info,0": `{"/ethdev/info":{"name":"virtio_user0","state":1,"port_id":0,"dev_started":1,"dev_configured":1}}`,
		"/ethdev/info,1": `{"/ethdev/info":{"name":"virtio_user1","port_id":1,"dev_started":0}}`,
		"/ethdev/info,2": `{"/ethdev/info":{"name":"old","port_id":2}}`,
	})
	c, err := Dial(path, time.Second, self)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for port, want := range map[int]bool{0: true, 1: false} {
		if got, err := c.EthdevStarted(port); err != nil || got != want {
			t.Errorf("EthdevStarted(%d) = %v, %v; want %v", port, got, err, want)
		}
	}
	if _, err := c.EthdevStarted(2); err == nil || !strings.Contains(err.Error(), "no dev_started") {
		t.Errorf("a reply without dev_started: err %v, want one naming the field", err)
	}
	if _, err := c.EthdevStarted(3); err == nil {
		t.Error("an unknown port: no error")
	}
}

func TestEthdevLinkUp(t *testing.T) {
	path := fakeServer(t, map[string]string{
		"/ethdev/link_status,0": `{"/ethdev/link_status": {"status": "UP", "speed": 10000, "duplex": "full-duplex"}}`,
		"/ethdev/link_status,1": `{"/ethdev/link_status": {"status": "DOWN"}}`,
		"/ethdev/link_status,2": `{"/ethdev/link_status": {"speed": 10000}}`,
		"/ethdev/link_status,3": `{"/ethdev/link_status": {"status": "SIDEWAYS"}}`,
		"/ethdev/link_status,4": `{"/ethdev/link_status": [1]}`,
	})
	c, err := Dial(path, time.Second, self)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for port, want := range map[int]bool{0: true, 1: false} {
		if got, err := c.EthdevLinkUp(port); err != nil || got != want {
			t.Errorf("EthdevLinkUp(%d) = %v, %v; want %v", port, got, err, want)
		}
	}
	for port, want := range map[int]string{2: "has no status", 3: `"SIDEWAYS"`, 4: "/ethdev/link_status,4", 5: "null reply"} {
		if _, err := c.EthdevLinkUp(port); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("EthdevLinkUp(%d): err %v, want one containing %q", port, err, want)
		}
	}
}
