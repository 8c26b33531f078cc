package plugin

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
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

// A port whose rules cannot be set would carry whatever the pod sends: ADD fails and takes back
// the port, the files and the lease.
func TestAddRollsBackWhenThePortCannotBeGuarded(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	n.flows.guardErr = errors.New("ovs-ofctl not found")
	_, a, err := n.add()
	if err == nil || !strings.Contains(err.Error(), "anti-spoofing") {
		t.Fatalf("got %v, want an anti-spoofing error", err)
	}
	got := f.recorded()
	if last := got[len(got)-1]; !reflect.DeepEqual(last, []string{"select Port"}) && !reflect.DeepEqual(last, []string{"mutate Bridge"}) {
		t.Errorf("the port was not removed: transactions %v", got)
	}
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
	rules, err := g.rules(7)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(rules), "\n")
	if want := fmt.Sprintf("delete cookie=%#x/-1", g.cookie()); lines[0] != want {
		t.Errorf("first rule %q, want %q: the port's rules of an earlier ADD removed", lines[0], want)
	}
	if lines[1] != "delete in_port=7" {
		t.Errorf("second rule %q, want the ofport cleared", lines[1])
	}
	for _, l := range lines[2:] {
		if !strings.HasPrefix(l, "add cookie=") || !strings.Contains(l, ",in_port=7,") {
			t.Errorf("rule %q is not an add on the port with the cookie", l)
		}
		pass := strings.HasSuffix(l, "actions=NORMAL") || strings.Contains(l, "goto_table")
		if strings.Contains(l, "table=1,") && pass != strings.Contains(l, "dl_src=02:aa:bb:cc:dd:ee") {
			t.Errorf("rule %q: only frames from the port's MAC may pass", l)
		}
		if pass && strings.Contains(l, "arp") && !strings.Contains(l, "arp_sha=02:aa:bb:cc:dd:ee") {
			t.Errorf("rule %q passes ARP claiming another MAC", l)
		}
	}
	if !strings.HasSuffix(lines[len(lines)-1], "priority=10,actions=drop") {
		t.Errorf("last rule %q, want the port's catch-all drop", lines[len(lines)-1])
	}
	other := *g
	other.Port = "fsk0123456789ac"
	if g.cookie() == other.cookie() || g.cookie() != (&guard{Port: g.Port}).cookie() || g.cookie()>>63 != 0 {
		t.Errorf("cookies %#x %#x: want distinct per port, stable, top bit clear", g.cookie(), other.cookie())
	}
	if g.mgmt() != "/run/ovs/br-fstack.mgmt" {
		t.Errorf("mgmt socket %s", g.mgmt())
	}
	if _, err := (&guard{Port: "p", Spec: antispoof.Spec{MAC: "nonsense"}}).rules(1); err == nil {
		t.Error("a malformed MAC gave rules")
	}
}
