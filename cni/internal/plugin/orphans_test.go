package plugin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A port of an earlier sandbox on the same socket (a node that lost its tmpfs) makes the
// insert's second wait fail; ADD removes it in a transaction of its own and inserts again.
func TestAddRemovesAnOrphanPortOnItsSocket(t *testing.T) {
	f := newFakeOVSDB(t, orphanOnSocket(
		map[string]any{"name": "fskorphan", "type": portType, "options": []any{"map", []any{}},
			"external_ids": []any{"map", []any{[]any{podcontract.OVSIDOwner, pluginType}, []any{podcontract.OVSIDContainerID, "c0"}}}},
		fakeReply{results: []any{map[string]any{"rows": []any{map[string]any{"_uuid": []any{"uuid", "orphan-1"}}}}}}))
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	assertTxns(t, f, insertTxn, []string{"select Interface"}, []string{"select Port"}, []string{"mutate Bridge"}, insertTxn)
	if w := fmt.Sprint(f.txn(1)[orphanWaitIndex]); !strings.Contains(w, "vhost-server-path") || !strings.Contains(w, "!=") {
		t.Errorf("the orphan wait is %s", w)
	}
	if m := fmt.Sprint(f.txn(4)[0]["mutations"]); !strings.Contains(m, "orphan-1") {
		t.Errorf("the orphan was not unlinked: %s", m)
	}
}

// A port on the socket that fstack-cni did not make is not removed: ADD fails and rolls back.
func TestAddLeavesAForeignPortOnItsSocket(t *testing.T) {
	f := newFakeOVSDB(t, orphanOnSocket(
		map[string]any{"name": "vhu1", "type": portType, "options": []any{"map", []any{}}, "external_ids": []any{"map", []any{}}},
		fakeReply{}))
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err == nil || !strings.Contains(err.Error(), "vhu1") {
		t.Fatalf("ADD: %v, want a failure naming vhu1", err)
	}
	n.assertNoFiles()
	n.assertIPAM(1, 1)
}

// orphanOnSocket scripts OVSDB with another interface already on the socket: the insert's orphan
// wait times out, the interface lookup finds iface, and the third transaction gets third.
func orphanOnSocket(iface map[string]any, third fakeReply) func(int, []map[string]any) fakeReply {
	return func(n int, ops []map[string]any) fakeReply {
		switch n {
		case 1:
			res := defaultResults(ops)
			res[orphanWaitIndex] = map[string]any{"error": "timed out", "details": "test"}
			return fakeReply{results: res[:orphanWaitIndex+1]}
		case 2:
			return fakeReply{results: []any{map[string]any{"rows": []any{iface}}}}
		case 3:
			return third
		}
		return fakeReply{}
	}
}
