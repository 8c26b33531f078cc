package plugin

import (
	"errors"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/cni/internal/openflow"
)

// ADD guards the port with the MAC it hands the pod in the device info; DEL removes the guard of
// the same port, and a second DEL (nothing left) asks for it again without failing.
func TestAddGuardsThePortWithItsMACAndDelRemovesIt(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	guarded, _ := n.flows.state()
	if want := map[string]string{a.PortName: a.MAC}; !reflect.DeepEqual(guarded, want) {
		t.Fatalf("guards after ADD %v, want %v", guarded, want)
	}
	for range 2 {
		if err := n.p.Del(n.args); err != nil {
			t.Fatal(err)
		}
	}
	guarded, unguards := n.flows.state()
	if len(guarded) != 0 || !reflect.DeepEqual(unguards, []string{a.PortName, a.PortName}) {
		t.Errorf("after DEL: guards %v, removals %v", guarded, unguards)
	}
}

// A port whose rules cannot be set would carry whatever the pod sends: ADD sets them before it
// makes the port, so it fails without making one, and takes back the rules it may have set and
// the lease.
func TestAddRollsBackWhenThePortCannotBeGuarded(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	n.flows.guardErr = errors.New("bridge unreachable")
	_, a, err := n.add()
	if err == nil || !strings.Contains(err.Error(), "anti-spoofing") {
		t.Fatalf("got %v, want an anti-spoofing error", err)
	}
	assertTxns(t, f) // no port made, none to remove
	if _, unguards := n.flows.state(); !reflect.DeepEqual(unguards, []string{a.PortName}) {
		t.Errorf("rollback removed guards %v", unguards)
	}
	n.assertNoFiles()
	n.assertIPAM(1, 1)
}

// The rules pass the port's MAC only, as source and inside ARP/ND, under one cookie that is a
// pure function of the port; they first clear whatever sits on the port's ofport.
// (internal/antispoof's tests say what the rules pass and drop.)
func TestGuardRules(t *testing.T) {
	g := &guard{OVSDB: "/run/ovs/db.sock", Bridge: "br-fstack", Port: "fsk0123456789ab",
		Spec: antispoof.Spec{MAC: "02:aa:bb:cc:dd:ee", Addrs: []netip.Addr{netip.MustParseAddr("10.99.0.10")}}}
	mods, err := g.flowMods(7)
	if err != nil {
		t.Fatal(err)
	}
	if d := mods[0]; d.Command != openflow.FlowDelete || d.Cookie != g.cookie() || d.CookieMask != ^uint64(0) || len(d.Match) != 0 {
		t.Errorf("first mod %+v, want the port's rules of an earlier ADD removed (cookie %#x)", d, g.cookie())
	}
	if d := mods[1]; d.Command != openflow.FlowDelete || d.CookieMask != 0 || !reflect.DeepEqual(d.Match, antispoof.InPort(7)) {
		t.Errorf("second mod %+v, want the ofport cleared", d)
	}
	for i, m := range mods[2:] {
		assertGuardMod(t, i, m, g.cookie(), "02:aa:bb:cc:dd:ee")
	}
	if last := mods[len(mods)-1]; last.Priority != 10 || last.Normal || last.GotoTable != 0 || len(last.Match) != 1 {
		t.Errorf("last mod %+v, want the port's catch-all drop", last)
	}
	other := *g
	other.Port = "fsk0123456789ac"
	if g.cookie() == other.cookie() || g.cookie() != (&guard{Port: g.Port}).cookie() || g.cookie()>>63 != 0 {
		t.Errorf("cookies %#x %#x: want distinct per port, stable, top bit clear", g.cookie(), other.cookie())
	}
	if g.mgmt() != "/run/ovs/br-fstack.mgmt" {
		t.Errorf("mgmt socket %s", g.mgmt())
	}
	if _, err := (&guard{Port: "p", Spec: antispoof.Spec{MAC: "nonsense"}}).flowMods(1); err == nil {
		t.Error("a malformed MAC gave rules")
	}
}

// assertGuardMod asserts that mod i adds a rule on ofport 7 with the port's cookie, that only
// frames from mac pass the source stage, and that no ARP naming another MAC passes.
func assertGuardMod(t *testing.T, i int, m openflow.FlowMod, cookie uint64, mac string) {
	t.Helper()
	if m.Command != openflow.FlowAdd || m.Cookie != cookie || !reflect.DeepEqual(m.Match[0], antispoof.InPort(7)[0]) {
		t.Errorf("mod %d %+v is not an add on the port with the cookie", i, m)
	}
	field := map[uint8]string{}
	for _, o := range m.Match {
		field[o.Field] = string(o.Value)
	}
	hw, _ := net.ParseMAC(mac)
	pass := m.Normal || m.GotoTable != 0
	if m.Table == antispoof.TableSource && pass != (field[openflow.FieldEthSrc] == string(hw)) {
		t.Errorf("mod %d %+v: only frames from the port's MAC may pass", i, m)
	}
	if _, arp := field[openflow.FieldARPSPA]; pass && arp && field[openflow.FieldARPSHA] != string(hw) {
		t.Errorf("mod %d %+v passes ARP claiming another MAC", i, m)
	}
}
