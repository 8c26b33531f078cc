package flowkeeper

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/cni/internal/openflow"
)

// The fakes stand in for ovsdb-server and ovs-vswitchd's management socket, to drive the
// keeper's decisions; the node tier (cni/test/node) runs it against real OVS-DPDK.

// fakeOVSDB answers every transact with the same three selects' rows.
func fakeOVSDB(t *testing.T, dir string, rows func() []any) string {
	t.Helper()
	path := filepath.Join(dir, "db.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				dec, enc := json.NewDecoder(conn), json.NewEncoder(conn)
				for {
					var req struct {
						ID any `json:"id"`
					}
					if dec.Decode(&req) != nil {
						return
					}
					_ = enc.Encode(map[string]any{"id": req.ID, "error": nil, "result": rows()})
				}
			}()
		}
	}()
	return path
}

func ovsRows(ports ...[3]any) func() []any { // name, ofport (nil: unset), mac ("" none)
	return func() []any {
		var refs, portRows, ifaces []any
		for i, p := range ports {
			id := "00000000-0000-4000-8000-00000000000" + string(rune('0'+i))
			refs = append(refs, []any{"uuid", id})
			portRows = append(portRows, map[string]any{"_uuid": []any{"uuid", id}, "name": p[0]})
			ids := []any{[]any{antispoof.ExternalIDOwner, antispoof.Owner}, []any{"kube-fstack.io/pod-name", "pod-" + p[0].(string)}}
			if p[2] != "" {
				ids = append(ids, []any{antispoof.ExternalIDMAC, p[2]})
			}
			ofport := any([]any{"set", []any{}})
			if p[1] != nil {
				ofport = p[1]
			}
			ifaces = append(ifaces, map[string]any{"name": p[0], "ofport": ofport, "external_ids": []any{"map", ids}})
		}
		bridge := map[string]any{"name": "br-fstack", "ports": []any{"set", refs}, "datapath_type": "netdev"}
		return []any{map[string]any{"rows": []any{bridge}}, map[string]any{"rows": portRows}, map[string]any{"rows": ifaces}}
	}
}

// fakeBridge keeps a flow count per cookie; a committed bundle sets its cookie's count to its
// adds, as the keeper's bundles (delete all of the cookie, then add) do on OVS.
type fakeBridge struct {
	mu      sync.Mutex
	flows   map[uint64]int
	bundles []uint64 // the cookie of each committed bundle's adds
	conns   []net.Conn
}

func newFakeBridge(t *testing.T, dir string) *fakeBridge {
	t.Helper()
	b := &fakeBridge{flows: map[uint64]int{}}
	l, err := net.Listen("unix", filepath.Join(dir, "br-fstack.mgmt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(); b.hangUp() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, conn)
			b.mu.Unlock()
			go b.serve(conn)
		}
	}()
	return b
}

func read(r io.Reader) (typ uint8, xid uint32, body []byte, err error) {
	var h [8]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return
	}
	body = make([]byte, int(binary.BigEndian.Uint16(h[2:]))-8)
	_, err = io.ReadFull(r, body)
	return h[1], binary.BigEndian.Uint32(h[4:]), body, err
}

func send(w io.Writer, typ uint8, xid uint32, body []byte) {
	h := []byte{openflow.Version, typ, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(h[2:], uint16(8+len(body)))
	binary.BigEndian.PutUint32(h[4:], xid)
	_, _ = w.Write(append(h, body...))
}

func (b *fakeBridge) serve(conn net.Conn) {
	defer conn.Close()
	if _, _, _, err := read(conn); err != nil {
		return
	}
	send(conn, openflow.TypeHello, 0, []byte{0, 1, 0, 8, 0, 0, 0, 1 << openflow.Version})
	var adds []uint64
	for {
		typ, xid, body, err := read(conn)
		if err != nil {
			return
		}
		switch typ {
		case openflow.TypeMultipartReq:
			cookie := binary.BigEndian.Uint64(body[24:])
			b.mu.Lock()
			n := b.flows[cookie]
			b.mu.Unlock()
			reply := append(binary.BigEndian.AppendUint16(nil, 2), make([]byte, 6+16)...)
			reply = append(binary.BigEndian.AppendUint32(reply, uint32(n)), 0, 0, 0, 0)
			send(conn, openflow.TypeMultipartReply, xid, reply)
		case openflow.TypeBundleAdd:
			inner := body[8:]
			if inner[8+17] == openflow.FlowAdd {
				adds = append(adds, binary.BigEndian.Uint64(inner[8:]))
			}
		case openflow.TypeBundleControl:
			reply := bytes.Clone(body)
			reply[5]++                         // the request's reply type
			if body[5] == 4 && len(adds) > 0 { // commit
				b.mu.Lock()
				b.flows[adds[0]] = len(adds)
				b.bundles = append(b.bundles, adds[0])
				b.mu.Unlock()
			}
			adds = nil
			send(conn, openflow.TypeBundleControl, xid, reply)
		}
	}
}

// hangUp ends every connection, as ovs-vswitchd exiting does.
func (b *fakeBridge) hangUp() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
}

func (b *fakeBridge) state() (map[uint64]int, []uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	flows := map[uint64]int{}
	for k, v := range b.flows {
		flows[k] = v
	}
	return flows, append([]uint64(nil), b.bundles...)
}

func (b *fakeBridge) drop(cookie uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.flows, cookie)
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A pass re-applies only the port whose rules are missing, leaves the complete one alone, warns
// once (not every pass) of a port without a recorded MAC, and asks for another pass soon while
// a port has no ofport yet.
func TestPassReappliesOnlyWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	bridge := newFakeBridge(t, dir)
	whole, bare := antispoof.Cookie("fskwhole"), antispoof.Cookie("fskbare")
	bridge.flows[whole] = 10
	logs := &logBuf{}
	k := &Keeper{Log: slog.New(slog.NewTextHandler(logs, nil)),
		OVSDB: fakeOVSDB(t, dir, ovsRows([3]any{"fskwhole", 3, "02:00:00:00:00:03"}, [3]any{"fskbare", 4, "02:00:00:00:00:04"},
			[3]any{"fskold", 5, ""}))}
	ctx := context.Background()
	if k.Pass(ctx) { // after re-applying, the next pass comes soon, to see the ofport hold
		t.Error("a pass that re-applied rules did not ask for a recheck")
	}
	flows, bundles := bridge.state()
	if len(bundles) != 1 || bundles[0] != bare || flows[bare] != 10 || flows[whole] != 10 {
		t.Errorf("bundles %x, flows %v: want only fskbare's rules re-applied", bundles, flows)
	}
	if !k.Pass(ctx) {
		t.Error("a pass with every rule in place asks for a recheck")
	}
	out := logs.String()
	if strings.Count(out, "re-applied the port's anti-spoofing flows") != 1 || !strings.Contains(out, "port=fskbare") {
		t.Errorf("log should name fskbare's re-application once:\n%s", out)
	}
	if strings.Count(out, "port=fskold") != 1 || !strings.Contains(out, antispoof.ExternalIDMAC) {
		t.Errorf("log should warn once of fskold's missing MAC:\n%s", out)
	}

	k.OVSDB = fakeOVSDB(t, t.TempDir(), ovsRows([3]any{"fsknew", nil, "02:00:00:00:00:06"}))
	if k.Pass(ctx) {
		t.Error("a port without an ofport yet did not ask for a recheck")
	}
}

// Run notices ovs-vswitchd going away (its connection ends) and re-applies what the restart
// lost without waiting for its period, also for a port made after its last pass: it holds a
// connection to the netdev bridge before the bridge has any port of ours.
func TestRunReappliesWhenTheBridgeComesBack(t *testing.T) {
	dir := t.TempDir()
	bridge := newFakeBridge(t, dir)
	var mu sync.Mutex
	rows := ovsRows()
	k := &Keeper{OVSDB: fakeOVSDB(t, dir, func() []any { mu.Lock(); defer mu.Unlock(); return rows() }),
		Period: time.Hour, Retry: 10 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { k.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	cookie := antispoof.Cookie("fskport")
	waitBundles := func(n int) {
		t.Helper()
		for range 1000 { // a bound on the wait, not a timed assertion
			if _, b := bridge.state(); len(b) >= n {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, b := bridge.state()
		t.Fatalf("%d bundles, want %d", len(b), n)
	}
	for range 1000 { // until the first pass connected to the bridge, which has no port yet
		bridge.mu.Lock()
		n := len(bridge.conns)
		bridge.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	rows = ovsRows([3]any{"fskport", 3, "02:00:00:00:00:03"}) // ADD made the port and its rules
	mu.Unlock()
	bridge.mu.Lock()
	bridge.flows[cookie] = 10
	bridge.mu.Unlock()
	bridge.drop(cookie) // the restart: the rules are gone...
	bridge.hangUp()     // ...and so is the keeper's connection
	waitBundles(1)
	if flows, _ := bridge.state(); flows[cookie] != 10 {
		t.Errorf("after the restart the port has %d rules, want 10", flows[cookie])
	}
}

// A port that ovs-vswitchd numbered other than its ADD requested (and put its rules on) has no
// rules on the number it has: the keeper puts them there and says, once, that the number is not
// the one requested.
func TestPassMovesTheRulesOfAMisnumberedPort(t *testing.T) {
	dir := t.TempDir()
	bridge := newFakeBridge(t, dir)
	rows := ovsRows([3]any{"fskmoved", 3, "02:00:00:00:00:03"})
	withRequest := func() []any {
		r := rows()
		r[2].(map[string]any)["rows"].([]any)[0].(map[string]any)["ofport_request"] = 32768
		return r
	}
	logs := &logBuf{}
	k := &Keeper{Log: slog.New(slog.NewTextHandler(logs, nil)), OVSDB: fakeOVSDB(t, dir, withRequest)}
	k.Pass(context.Background())
	if flows, bundles := bridge.state(); len(bundles) != 1 || flows[antispoof.Cookie("fskmoved")] != 10 {
		t.Errorf("bundles %x, flows %v: want fskmoved's rules re-applied", bundles, flows)
	}
	bridge.drop(antispoof.Cookie("fskmoved"))
	k.Pass(context.Background())
	out := logs.String()
	if strings.Count(out, "another OpenFlow port number than its ADD requested") != 1 || !strings.Contains(out, "requested=32768") || !strings.Contains(out, "ofport=3") {
		t.Errorf("log should say once that fskmoved has 3, not the requested 32768:\n%s", out)
	}
}
