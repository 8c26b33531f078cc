package plugin

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// numberRow is an Interface as ADD's number read sees it; 0 leaves a column unset.
func numberRow(name string, ofport, requested int64) map[string]any {
	opt := func(n int64) any {
		if n == 0 {
			return []any{"set", []any{}}
		}
		return n
	}
	return map[string]any{"name": name, "ofport": opt(ofport), "ofport_request": opt(requested)}
}

// ADD asks for the lowest number of its range that no Interface holds or requests, puts the
// port's rules on it before the port's transaction, and makes that transaction fail unless the
// number is still free: a port is guarded from its first frame, and ADD does not wait for
// ovs-vswitchd to number it.
func TestAddNumbersThePortAndGuardsTheNumberFirst(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	f.numbers = []any{numberRow("uplink", 1, 0), numberRow("a", ofportFirst, ofportFirst), numberRow("b", 0, ofportFirst+1),
		numberRow("c", ofportFirst+2, 0), numberRow("d", ofportFirst+4, ofportFirst+4)}
	n := newNode(t, f.path, nil)
	txnsAtGuard := -1
	n.flows.onGuard = func(*guard) { txnsAtGuard = len(f.recorded()) }
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	want := int64(ofportFirst + 3)
	if on := n.flows.ons(); on[a.PortName] != want || txnsAtGuard != 0 {
		t.Fatalf("rules put on %d with %d transactions before them; want %d, before the port's", on[a.PortName], txnsAtGuard, want)
	}
	assertTxns(t, f, insertTxn)
	ops := f.txn(1)
	if got := ops[slices.Index(insertTxn, "insert Interface")]["row"].(map[string]any)["ofport_request"]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the Interface requests %v, want %d", got, want)
	}
	for i, col := range []string{"ofport_request", "ofport"} {
		w := fmt.Sprint(ops[ofportWaitIndex+i])
		if !strings.Contains(w, fmt.Sprintf("[%s == %d]", col, want)) || !strings.Contains(w, "rows:[]") {
			t.Errorf("wait %d: %s, want no Interface with %s %d", i, w, col, want)
		}
	}
	if f.numberReads != 1 {
		t.Errorf("%d reads of the numbers, want 1", f.numberReads)
	}
}

// A client that does not take the socket root's lock took the number between the read and the
// port's transaction: the transaction fails, ADD says "try again" and removes the rules it set.
func TestAddGivesUpANumberTakenMeanwhile(t *testing.T) {
	f := newFakeOVSDB(t, func(n int, ops []map[string]any) fakeReply {
		if n == 1 {
			res := defaultResults(ops)
			res[ofportWaitIndex+1] = map[string]any{"error": "timed out", "details": "wait"}
			return fakeReply{results: res[:ofportWaitIndex+2]}
		}
		return fakeReply{}
	})
	n := newNode(t, f.path, nil)
	_, a, err := n.add()
	if codeOf(err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), fmt.Sprint(ofportFirst)) {
		t.Fatalf("got %v, want code 11 naming number %d", err, ofportFirst)
	}
	if _, unguards := n.flows.state(); !reflect.DeepEqual(unguards, []string{a.PortName}) {
		t.Errorf("rollback removed guards %v", unguards)
	}
	n.assertNoFiles()
	n.assertIPAM(1, 1)
}

// A port of the plugin that ovs-vswitchd numbered other than it asked (another client took the
// number) has its rules on the wrong number: the next ADD on the node moves them to the number it
// has, unless they are there already.
func TestAddMovesTheRulesOfAMisnumberedPort(t *testing.T) {
	ids := []any{"map", []any{[]any{podcontract.OVSIDOwner, pluginType}, []any{podcontract.OVSIDMAC, "02:00:00:00:00:07"},
		[]any{podcontract.OVSIDAddrs, "10.9.0.7"}, []any{podcontract.OVSIDVLANs, ""}}}
	f := newFakeOVSDB(t, func(n int, ops []map[string]any) fakeReply {
		if len(ops) == 1 && ops[0]["op"] == "select" && strings.Contains(fmt.Sprint(ops[0]["where"]), "fskmoved") {
			row := map[string]any{"name": "fskmoved", "type": portType, "options": []any{"map", []any{}}, "external_ids": ids,
				"other_config": []any{"map", []any{}}}
			return fakeReply{results: []any{map[string]any{"rows": []any{row}}}}
		}
		return fakeReply{}
	})
	f.numbers = []any{numberRow("fskmoved", 5, ofportFirst), numberRow("other", ofportFirst, 0)}
	n := newNode(t, f.path, nil)
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	if on := n.flows.ons(); on["fskmoved"] != 5 || on[a.PortName] != ofportFirst+1 {
		t.Errorf("rules on %v; want the misnumbered port's on 5, the new port's on %d", on, ofportFirst+1)
	}
	// Once the rules are where the port is, the next ADD leaves them.
	guards := 0
	n.flows.onGuard = func(g *guard) {
		if g.Port == "fskmoved" {
			guards++
		}
	}
	n.args.ContainerID = "c2"
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	if guards != 0 {
		t.Errorf("the misnumbered port's rules were set again %d times", guards)
	}
}

// DEL leaves the rules of a port ADD numbered on its number (they match no port once it is gone,
// and the ADD that gives the number again replaces them), so it does not wait for ovs-vswitchd;
// it removes those on a number OVS chose (an older fstack-cni's port, or one OVS numbered
// otherwise than it asked), which OVS may give to any port, and of a port it did not find.
func TestDelRemovesOnlyTheRulesOfPortsOVSNumbered(t *testing.T) {
	withRequest := func(socket string, requested int64, ofport ...int64) fakeReply {
		r := portRows(socket, 1)
		row := r.results[0].(map[string]any)["rows"].([]any)[0].(map[string]any)
		row["ofport_request"] = numberRow("", 0, requested)["ofport_request"]
		if len(ofport) > 0 {
			row["ofport"] = ofport[0]
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		reply   func(socket string) fakeReply
		unguard bool
	}{
		{"numbered by ADD", func(s string) fakeReply { return withRequest(s, ofportFirst) }, false},
		{"granted what ADD asked", func(s string) fakeReply { return withRequest(s, ofportFirst, ofportFirst) }, false},
		{"granted another number", func(s string) fakeReply { return withRequest(s, ofportFirst, 3) }, true},
		{"numbered by OVS", func(s string) fakeReply { return withRequest(s, 0) }, true},
		{"requested below the range", func(s string) fakeReply { return withRequest(s, 7) }, true},
		{"gone", func(string) fakeReply { return fakeReply{} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeOVSDB(t, nil)
			n := newNode(t, f.path, nil)
			_, a, err := n.add()
			if err != nil {
				t.Fatal(err)
			}
			f.respond = func(int, []map[string]any) fakeReply { return tc.reply(a.Socket) }
			if err := n.p.Del(n.args); err != nil {
				t.Fatal(err)
			}
			if _, unguards := n.flows.state(); (len(unguards) > 0) != tc.unguard {
				t.Errorf("DEL removed the rules of %v; want removal %v", unguards, tc.unguard)
			}
			n.assertNoFiles()
		})
	}
}

func TestLowestFreeSkipsEveryNumberInUse(t *testing.T) {
	used := map[int64]bool{}
	for n := int64(ofportFirst); n <= ofportLast; n++ {
		used[n] = true
	}
	if _, err := lowestFree(used); err == nil || !strings.Contains(err.Error(), "no OpenFlow port number left") {
		t.Errorf("a full range: %v", err)
	}
	delete(used, ofportLast)
	if n, err := lowestFree(used); n != ofportLast || err != nil {
		t.Errorf("got %d, %v; want %d", n, err, ofportLast)
	}
}
