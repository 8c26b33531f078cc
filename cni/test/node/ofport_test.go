package node

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
)

// The plugin's OpenFlow port numbers: ADD requests them from 32768 up, which ovs-vswitchd never
// gives a port nobody numbered (cni/internal/plugin/ofport.go).
const ofportFirst = 32768

// ADD numbers its port (ofport_request) with the lowest number no interface holds or requests,
// puts the rules on it before the port exists and returns without waiting for ovs-vswitchd. A
// number another port has taken (here a port someone made by hand, requesting it) is passed
// over: the new port is granted the number it asked for, carries its rules from its first
// frame, and a pod sending with another MAC is dropped.
func TestAddNumbersItsPortAndPassesOverATakenNumber(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(1120)
	taken := lowestFreeOFPort(t)
	foreign := "fskhand"
	// An internal port (a tap in ovs-vswitchd's namespace): the tests' helpers count the
	// vhost-user ports as the plugin's.
	if out, err := env.ovs.Vsctl("add-port", bridge, foreign, "--", "set", "Interface", foreign, "type=internal",
		fmt.Sprintf("ofport_request=%d", taken)); err != nil {
		t.Fatalf("pre-take number %d: %v: %s", taken, err, out)
	}
	n.mustAdd(p)
	t.Cleanup(func() {
		n.mustDel(p)
		_, _ = env.ovs.Vsctl("--if-exists", "del-port", foreign)
		n.assertNothingLeft()
		assertNoGuardRules(t)
	})
	port := portOf(t, p)
	requested := vsctlGet(t, "Interface", port, "ofport_request")
	if r, err := strconv.Atoi(requested); err != nil || r < ofportFirst || r == taken {
		t.Fatalf("port %s requested %q; want a number from %d up other than the taken %d", port, requested, ofportFirst, taken)
	}
	// The rules are there already, on the requested number, whether or not OVS has numbered it.
	for _, l := range rulesOfPort(t, port) {
		if !strings.Contains(l, "in_port="+requested+",") && !strings.Contains(l, "in_port="+requested+" ") {
			t.Errorf("rule not on the requested number %s: %s", requested, l)
		}
	}
	if got := waitOFPort(t, port); got != requested {
		t.Fatalf("ovs-vswitchd gave port %s number %s; it requested %s", port, got, requested)
	}
	if err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt()); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	assertForgedDropped(t, filepath.Join(n.socketRoot(), p.uid), podDevInfo(t, n, p), "10.99.0.205/24")
}

// When ovs-vswitchd grants a port of the plugin another number than it requested, its rules are
// on a number it does not have. Here the port is made again, by hand, with the same name, socket
// and external_ids, requesting a number a hand-made port holds, so ovs-vswitchd gives it one of
// its own: CHECK says so, naming both numbers, and the next ADD on the node moves the rules to
// the number the port has, where CHECK counts every one of them, and a pod sending with another
// MAC is dropped.
func TestMisnumberedPortEndsGuarded(t *testing.T) {
	n, p, q := newNet(t, "1.1.0"), newPod(1121), newPod(1122)
	n.mustAdd(p)
	t.Cleanup(func() { n.mustDel(p); n.assertNothingLeft(); assertNoGuardRules(t) })
	port := portOf(t, p)
	held := lowestFreeOFPort(t)
	foreign := "fskhand2"
	if out, err := env.ovs.Vsctl("add-port", bridge, foreign, "--", "set", "Interface", foreign, "type=internal",
		fmt.Sprintf("ofport_request=%d", held)); err != nil {
		t.Fatalf("hand-made port: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = env.ovs.Vsctl("--if-exists", "del-port", foreign) })
	ifaceIDs, portIDs := vsctlGet(t, "Interface", port, "external_ids"), vsctlGet(t, "Port", port, "external_ids")
	socket := vsctlGet(t, "Interface", port, "options:vhost-server-path")
	if out, err := env.ovs.Vsctl("del-port", port); err != nil { // apart from the add: OVS keeps the socket otherwise
		t.Fatalf("del-port: %v: %s", err, out)
	}
	if out, err := env.ovs.Vsctl("add-port", bridge, port, "external_ids="+portIDs, "--", "set", "Interface", port, "type=dpdkvhostuserclient",
		"options:vhost-server-path="+socket, "other_config:tx-steering=hash", fmt.Sprintf("ofport_request=%d", held), "external_ids="+ifaceIDs); err != nil {
		t.Fatalf("make the port again: %v: %s", err, out)
	}
	granted := waitOFPort(t, port)
	if g, err := strconv.Atoi(granted); err != nil || g <= 0 || g >= ofportFirst {
		t.Fatalf("ovs-vswitchd gave the port %q; want a number of its own below %d", granted, ofportFirst)
	}
	err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt())
	if err == nil || !strings.Contains(err.Error(), "requested OpenFlow port number "+strconv.Itoa(held)) || !strings.Contains(err.Error(), "gave it "+granted) {
		t.Fatalf("CHECK of the misnumbered port: %v", err)
	}
	n.mustAdd(q) // the next ADD on the node moves the rules
	t.Cleanup(func() { n.mustDel(q) })
	for _, l := range rulesOfPort(t, port) {
		if !strings.Contains(l, "in_port="+granted+",") && !strings.Contains(l, "in_port="+granted+" ") {
			t.Errorf("rule not on the granted number %s: %s", granted, l)
		}
	}
	if err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt()); err != nil {
		t.Errorf("CHECK after the next ADD: %v", err)
	}
	n.mustDel(q) // the traffic helpers take the bridge's one vhost-user port
	assertForgedDropped(t, filepath.Join(n.socketRoot(), p.uid), podDevInfo(t, n, p), "10.99.0.206/24")
}

// lowestFreeOFPort is the number the plugin's next ADD would request: the lowest from 32768 up
// that no interface holds or requests.
func lowestFreeOFPort(t *testing.T) int {
	t.Helper()
	out, err := env.ovs.Vsctl("--no-headings", "--format=csv", "--columns=ofport,ofport_request", "list", "Interface")
	if err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for _, f := range strings.FieldsFunc(out, func(r rune) bool { return r == ',' || r == '\n' }) {
		if k, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			used[k] = true
		}
	}
	for k := ofportFirst; ; k++ {
		if !used[k] {
			return k
		}
	}
}

// waitOFPort waits for ovs-vswitchd to number port and returns the number.
func waitOFPort(t *testing.T, port string) string {
	t.Helper()
	if out, err := env.ovs.Vsctl("--timeout=30", "wait-until", "Interface", port, "ofport!=[]"); err != nil {
		t.Fatalf("port %s not numbered: %v: %s", port, err, out)
	}
	return vsctlGet(t, "Interface", port, "ofport")
}

// rulesOfPort lists the port's rules (by its cookie); none fails the test.
func rulesOfPort(t *testing.T, port string) []string {
	t.Helper()
	cookie := fmt.Sprintf("cookie=%#x,", antispoof.Cookie(port))
	var out []string
	for _, l := range guardRules(t) {
		if strings.HasPrefix(l, cookie) {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatalf("port %s has no anti-spoofing rules:\n%s", port, dumpFlows(t))
	}
	return out
}
