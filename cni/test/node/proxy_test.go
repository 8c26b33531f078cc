package node

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// cutProxy stands between the plugin and the real ovsdb-server and breaks the first connection
// at its n-th request: before forwarding it, or after forwarding it but before the reply comes
// back (the server committed, the client cannot know). Later connections pass through, as
// they would once a restarted server is back.
type cutProxy struct {
	path         string
	n            int
	forwardFirst bool
	ln           net.Listener
	mu           sync.Mutex
	conns        int
}

func startCutProxy(t *testing.T, dir string, n int, forwardFirst bool) *cutProxy {
	t.Helper()
	p := &cutProxy{path: filepath.Join(dir, "proxy.sock"), n: n, forwardFirst: forwardFirst}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	// The plugin finds the bridge's management socket beside OVSDB's, as OVS makes them.
	mgmt := bridge + ".mgmt"
	if err := os.Symlink(filepath.Join(env.ovs.Dir, mgmt), filepath.Join(dir, mgmt)); err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	go p.serve()
	t.Cleanup(func() { ln.Close() })
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns++
		first := p.conns == 1
		p.mu.Unlock()
		go p.handle(c, first)
	}
}

func (p *cutProxy) handle(client net.Conn, cut bool) {
	defer client.Close()
	server, err := net.Dial("unix", env.ovs.DBSock())
	if err != nil {
		return
	}
	defer server.Close()
	if !cut {
		go io.Copy(client, server) //nolint:errcheck // ends when either side closes
		_, _ = io.Copy(server, client)
		return
	}
	p.relayUntilCut(client, server)
}

func (p *cutProxy) relayUntilCut(client, server net.Conn) {
	dec, srv := json.NewDecoder(client), json.NewDecoder(server)
	for i := 1; ; i++ {
		var req json.RawMessage
		if dec.Decode(&req) != nil {
			return
		}
		if i == p.n && !p.forwardFirst {
			return
		}
		if _, err := server.Write(req); err != nil {
			return
		}
		var reply json.RawMessage
		if srv.Decode(&reply) != nil {
			return
		}
		if i == p.n {
			return
		}
		if _, err := client.Write(reply); err != nil {
			return
		}
	}
}

// An OVSDB that goes away mid-ADD: the ADD fails with "try again later" and undoes everything,
// including a port the server committed but never confirmed.
func TestRollbackWhenOVSDBDiesMidAdd(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		forward bool
	}{
		{"after IPAM and the rules, at the port insert, not sent", 2, false}, // the first request reads the numbers
		{"at the port insert, committed but unconfirmed", 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, p := newNet(t, "1.1.0"), newPod(800)
			proxy := startCutProxy(t, n.dir, tc.n, tc.forward)
			n.ovsdb = proxy.path
			_, err := n.add(p)
			assertCode(t, err, 11, "OVSDB unreachable")
			n.assertNothingLeft()
			proxy.mu.Lock()
			defer proxy.mu.Unlock()
			if tc.forward && proxy.conns < 2 {
				t.Fatal("the rollback never reconnected to remove the committed port")
			}
		})
	}
}
