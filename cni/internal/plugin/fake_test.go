package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// fakeOVSDB is an RFC 7047 server on a unix socket that answers transactions by a script and
// records their operations, so a test can assert what the plugin asked for and make the server
// refuse a transaction or vanish at an exact one. The real ovsdb-server is exercised by
// cni/test/node; this covers the failure paths it does not produce on demand.
type fakeOVSDB struct {
	path    string
	respond func(n int, ops []map[string]any) fakeReply
	mu      sync.Mutex
	txns    [][]map[string]any
	conns   int
	// ADD's read of the OpenFlow port numbers (ofport.go) is answered apart, from numbers (rows
	// of name, ofport and ofport_request; none by default), and counted in numberReads, not in
	// txns: the scripts number the transactions that make and remove ports.
	numbers     []any
	numberReads int
}

// fakeReply is the answer to one transaction: results replaces the default per-operation
// results; hangUp closes the connection instead of answering (the server may have committed).
type fakeReply struct {
	results []any
	hangUp  bool
}

func newFakeOVSDB(t *testing.T, respond func(n int, ops []map[string]any) fakeReply) *fakeOVSDB {
	t.Helper()
	dir, err := os.MkdirTemp("", "fsk-ovsdb-") // t.TempDir() paths can exceed sun_path
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeOVSDB{path: filepath.Join(dir, "db.sock"), respond: respond}
	ln, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); os.RemoveAll(dir) })
	go f.serve(ln)
	return f
}

func (f *fakeOVSDB) serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns++
		f.mu.Unlock()
		go f.handle(conn)
	}
}

func (f *fakeOVSDB) handle(conn net.Conn) {
	defer conn.Close()
	dec, enc := json.NewDecoder(conn), json.NewEncoder(conn)
	for {
		var req struct {
			Method string            `json:"method"`
			Params []json.RawMessage `json:"params"`
			ID     json.RawMessage   `json:"id"`
		}
		if dec.Decode(&req) != nil || req.Method != "transact" {
			return
		}
		ops := make([]map[string]any, 0, len(req.Params))
		for _, raw := range req.Params[1:] {
			var op map[string]any
			_ = json.Unmarshal(raw, &op)
			ops = append(ops, op)
		}
		f.mu.Lock()
		if isNumberRead(ops) {
			f.numberReads++
			rows := f.numbers
			f.mu.Unlock()
			bridge := map[string]any{"rows": []any{map[string]any{"datapath_type": "netdev"}}}
			_ = enc.Encode(map[string]any{"id": req.ID, "result": []any{map[string]any{"rows": append([]any{}, rows...)}, bridge}, "error": nil})
			continue
		}
		f.txns = append(f.txns, ops)
		n := len(f.txns)
		f.mu.Unlock()
		r := fakeReply{}
		if f.respond != nil {
			r = f.respond(n, ops)
		}
		if r.hangUp {
			return
		}
		if r.results == nil {
			r.results = defaultResults(ops)
		}
		_ = enc.Encode(map[string]any{"id": req.ID, "result": r.results, "error": nil})
	}
}

// isNumberRead tells ADD's read of every Interface's OpenFlow port numbers (and of its bridge's
// type: the fake's bridges are all netdev).
func isNumberRead(ops []map[string]any) bool {
	if len(ops) != 2 || ops[1]["table"] != "Bridge" {
		return false
	}
	where, _ := ops[0]["where"].([]any)
	return ops[0]["op"] == "select" && ops[0]["table"] == "Interface" && len(where) == 0 &&
		fmt.Sprint(ops[0]["columns"]) == "[name ofport ofport_request]"
}

// defaultResults is a server with an empty database and every bridge netdev.
func defaultResults(ops []map[string]any) []any {
	res := make([]any, 0, len(ops))
	for _, op := range ops {
		switch op["op"] {
		case "select":
			res = append(res, map[string]any{"rows": []any{}})
		case "insert":
			res = append(res, map[string]any{"uuid": []any{"uuid", "9f0f0000-0000-4000-8000-000000000001"}})
		case "mutate", "delete":
			res = append(res, map[string]any{"count": 1})
		default:
			res = append(res, map[string]any{})
		}
	}
	return res
}

// recorded returns the operation names of every transaction so far, e.g. [[wait insert ...]].
func (f *fakeOVSDB) recorded() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]string, 0, len(f.txns))
	for _, ops := range f.txns {
		names := make([]string, 0, len(ops))
		for _, op := range ops {
			name, _ := op["op"].(string)
			if table, ok := op["table"].(string); ok {
				name += " " + table
			}
			names = append(names, name)
		}
		out = append(out, names)
	}
	return out
}

func (f *fakeOVSDB) txn(n int) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.txns[n-1]
}

func (f *fakeOVSDB) connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conns
}

// fakeIPAM hands out one address and counts calls, so tests can check that every lease an ADD
// took is given back.
type fakeIPAM struct {
	mu     sync.Mutex
	adds   int
	dels   int
	addErr error
	// noGateway leaves the result's gateway out, as an IPAM section naming none does.
	noGateway bool
}

func (f *fakeIPAM) Add(context.Context, string, []byte) (types.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adds++
	if f.addErr != nil {
		return nil, f.addErr
	}
	_, ipn, _ := net.ParseCIDR("10.9.0.0/24")
	ipn.IP = net.ParseIP("10.9.0.5").To4()
	gw := net.ParseIP("10.9.0.1")
	if f.noGateway {
		gw = nil
	}
	return &current.Result{CNIVersion: current.ImplementedSpecVersion,
		IPs: []*current.IPConfig{{Address: *ipn, Gateway: gw}}}, nil
}

func (f *fakeIPAM) Del(context.Context, string, []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dels++
	return nil
}

func (f *fakeIPAM) Check(context.Context, string, []byte) error  { return nil }
func (f *fakeIPAM) GC(context.Context, string, []byte) error     { return nil }
func (f *fakeIPAM) Status(context.Context, string, []byte) error { return nil }

func (f *fakeIPAM) counts() (adds, dels int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.adds, f.dels
}

// fakeFlows records the guards set and removed, by port name; guardErr fails Guard. The real
// OpenFlow rules are exercised by cni/test/node.
type fakeFlows struct {
	mu       sync.Mutex
	guarded  map[string]string // port -> MAC
	on       map[string]int64  // port -> the number its rules were put on
	unguards []string
	guardErr error
	// onGuard, when set, runs at each Guard (before it takes the lock).
	onGuard func(g *guard)
}

func (f *fakeFlows) Guard(_ context.Context, g *guard) error {
	if f.onGuard != nil {
		f.onGuard(g)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.guardErr != nil {
		return f.guardErr
	}
	if f.guarded == nil {
		f.guarded, f.on = map[string]string{}, map[string]int64{}
	}
	f.guarded[g.Port], f.on[g.Port] = g.Spec.MAC, g.OFPort
	return nil
}

func (f *fakeFlows) Unguard(_ context.Context, g *guard) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.guarded, g.Port)
	f.unguards = append(f.unguards, g.Port)
	return nil
}

func (f *fakeFlows) Check(_ context.Context, g *guard) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.guarded[g.Port]; !ok {
		return fmt.Errorf("port %s has no anti-spoofing rules", g.Port)
	}
	return nil
}

// ons is the number each port's rules were last put on.
func (f *fakeFlows) ons() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.on)
}

func (f *fakeFlows) state() (map[string]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.guarded), slices.Clone(f.unguards)
}

// node is one test's plugin, config and attachment arguments.
type node struct {
	t      *testing.T
	p      *Plugin
	ipam   *fakeIPAM
	flows  *fakeFlows
	root   string
	devDir string
	// kubelet stands in for the kubelet's root dir: newNode makes the emptyDir of pod u1 in it,
	// as the kubelet does before it asks for the sandbox.
	kubelet string
	stdin   []byte
	args    *skel.CmdArgs
}

func newNode(t *testing.T, ovsdbPath string, over map[string]any) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{t: t, ipam: &fakeIPAM{}, root: filepath.Join(dir, "vhost"), devDir: filepath.Join(dir, "devinfo"),
		kubelet: filepath.Join(dir, "kubelet")}
	if k, ok := over["kubeletRootDir"].(string); ok {
		n.kubelet = k
	}
	conf := map[string]any{"ovsdbSocket": ovsdbPath, "socketRoot": n.root, "deviceInfoDir": n.devDir,
		"kubeletRootDir": n.kubelet, "logFile": filepath.Join(dir, "fstack-cni.log"), "ipam": map[string]any{"type": "fake"}}
	for k, v := range over {
		conf[k] = v
	}
	if err := os.MkdirAll(n.volume(), 0o777); err != nil {
		t.Fatal(err)
	}
	n.stdin = confJSON(t, conf)
	n.flows = &fakeFlows{}
	n.p = &Plugin{Timeout: 10 * time.Second, IPAM: n.ipam, Stderr: io.Discard, Flows: n.flows}
	n.p.NodeConfig, n.p.NodeConfigOwner = writeNodeConf(t, dir, nodeConfOf(conf, "ns")), os.Getuid()
	n.args = &skel.CmdArgs{ContainerID: "c1", IfName: "net1", Netns: "/run/netns/p1", StdinData: n.stdin,
		Args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web-0;K8S_POD_UID=u1"}
	return n
}

// add runs ADD up to its result, without printing it.
func (n *node) add() (*current.Result, *attachment, error) {
	n.t.Helper()
	c, err := n.p.start(n.stdin, "ADD")
	if err != nil {
		n.t.Fatal(err)
	}
	defer c.closer()
	a, err := c.addAttachment(n.args)
	if err != nil {
		n.t.Fatal(err)
	}
	res, err := n.p.add(c, a, n.stdin)
	return res, a, err
}

// nodeConfOf is the node config of a node whose paths are those conf names, serving the
// namespaces given: the node tests' plugin is configured as a node's would be, its paths
// named on both sides.
func nodeConfOf(conf map[string]any, namespaces ...string) *nodeconf.Conf {
	str := func(k string) string { s, _ := conf[k].(string); return s }
	return &nodeconf.Conf{OVSDBSocket: str("ovsdbSocket"), SocketRoot: str("socketRoot"), KubeletRootDir: str("kubeletRootDir"),
		DeviceInfoDir: str("deviceInfoDir"), LogFile: str("logFile"), Namespaces: namespaces}
}

// writeNodeConf writes node as the node config in a directory of its own beneath dir (mode
// 0644, owned by the test's uid, which the plugin is then told to require) and returns its path.
func writeNodeConf(t *testing.T, dir string, node *nodeconf.Conf) string {
	t.Helper()
	etc := filepath.Join(dir, "etc-kube-fstack")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := node.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(etc, "cni.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// logFile is the plugin's log file in the node's config.
func (n *node) logFile() string {
	var conf struct {
		LogFile string `json:"logFile"`
	}
	if err := json.Unmarshal(n.stdin, &conf); err != nil {
		n.t.Fatal(err)
	}
	return conf.LogFile
}

// volume is pod u1's emptyDir VhostVolume in the stand-in kubelet root.
func (n *node) volume() string {
	return filepath.Join(n.kubelet, "pods", "u1", "volumes", "kubernetes.io~empty-dir", "fstack-vhost")
}

// shared is the config of another plugin run on the same node: the same roots.
func (n *node) shared(over map[string]any) map[string]any {
	c := map[string]any{"socketRoot": n.root, "deviceInfoDir": n.devDir, "kubeletRootDir": n.kubelet}
	for k, v := range over {
		c[k] = v
	}
	return c
}

// assertNoFiles fails when the pod's link, any device-info file (or temp) or the attachment's
// files in the pod's emptyDir exist.
func (n *node) assertNoFiles() {
	n.t.Helper()
	if _, err := os.Lstat(filepath.Join(n.root, "u1")); !errors.Is(err, os.ErrNotExist) {
		n.t.Errorf("left: %s (err %v)", filepath.Join(n.root, "u1"), err)
	}
	entries, err := os.ReadDir(n.devDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		n.t.Fatal(err)
	}
	if len(entries) != 0 {
		n.t.Errorf("left in %s: %v", n.devDir, entries)
	}
	for _, f := range []string{"net1.json", "net1.sock"} {
		if _, err := os.Lstat(filepath.Join(n.volume(), f)); !errors.Is(err, os.ErrNotExist) {
			n.t.Errorf("left in the emptyDir: %s (err %v)", f, err)
		}
	}
}

func (n *node) assertIPAM(adds, dels int) {
	n.t.Helper()
	if a, d := n.ipam.counts(); a != adds || d != dels {
		n.t.Errorf("IPAM ADD %d times and DEL %d times, want %d and %d", a, d, adds, dels)
	}
}

// logLines reads the node's fstack-cni log and parses its lines (none when empty: n.add stops
// before the command's own result line).
func (n *node) logLines(t *testing.T) (string, []logtest.Line) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(filepath.Dir(n.root), "fstack-cni.log"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []logtest.Line
	if len(log) > 0 {
		if lines, err = logtest.Parse(string(log), logging.FormatText, logging.ComponentCNI); err != nil {
			t.Fatal(err)
		}
	}
	return string(log), lines
}
