package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// withOVSVersion answers ADD's insert transaction as a server whose Open_vSwitch row has
// ovs_version v ("" for a row where ovs-ctl never set it).
func withOVSVersion(v string) func(int, []map[string]any) fakeReply {
	return func(_ int, ops []map[string]any) fakeReply {
		res := defaultResults(ops)
		if len(ops) == len(insertTxn) {
			version := any([]any{"set", []any{}})
			if v != "" {
				version = v
			}
			res[slices.Index(insertTxn, "select Open_vSwitch")] = map[string]any{"rows": []any{map[string]any{"ovs_version": version}}}
		}
		return fakeReply{results: res}
	}
}

// Every port asks for hash tx steering in the transaction that creates it: the queue count is
// the pod's to negotiate later, and OVS applies it only to ports with more than one queue.
func TestAddAsksForHashTxSteeringInTheInsert(t *testing.T) {
	f := newFakeOVSDB(t, withOVSVersion("3.1.0"))
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	assertTxns(t, f, insertTxn)
	iface := f.txn(1)[slices.Index(insertTxn, "insert Interface")]["row"].(map[string]any)
	if got := fmt.Sprint(iface["other_config"]); got != "[map [[tx-steering hash]]]" {
		t.Errorf("Interface other_config is %s, want tx-steering=hash", got)
	}
	if sel := f.txn(1)[slices.Index(insertTxn, "select Open_vSwitch")]; !strings.Contains(fmt.Sprint(sel["columns"]), "ovs_version") {
		t.Errorf("the insert transaction does not read ovs_version: %v", sel)
	}
}

// An OVS older than 3.1 keeps the key and ignores it: ADD succeeds (a one-queue pod works
// there) and logs a warning that names the port, the version and the fix. A 3.1+ or unknown
// version logs none.
func TestAddWarnsWhenOVSIgnoresTxSteering(t *testing.T) {
	for version, warns := range map[string]bool{"3.0.3": true, "2.17.9": true, "3.1.0": false, "3.10.1": false, "": false} {
		f := newFakeOVSDB(t, withOVSVersion(version))
		n := newNode(t, f.path, nil)
		_, a, err := n.add()
		if err != nil {
			t.Fatalf("OVS %q: %v", version, err)
		}
		log, lines := n.logLines(t)
		_, warned := logtest.Find(lines, "tx-steering", map[string]string{"level": "WARN"})
		if warned != warns {
			t.Errorf("OVS %q: warned %v, want %v:\n%s", version, warned, warns, log)
		}
		for _, want := range []string{a.PortName, "OVS " + version + " ignores other_config:tx-steering=hash", "OVS 3.1 or newer"} {
			if warns && !strings.Contains(log, want) {
				t.Errorf("OVS %q: the warning lacks %q:\n%s", version, want, log)
			}
		}
	}
}

func TestIgnoresTxSteering(t *testing.T) {
	for v, want := range map[string]bool{
		"2.17.9": true, "3.0.0": true, "3.0.90": true, "2.17.9-1ubuntu1": true,
		"3.1.0": false, "3.1": false, "3.1.2-1": false, "3.2.0": false, "3.10.0": false, "4.0.0": false,
		"": false, "unknown": false, "x.y": false,
	} {
		if got := ignoresTxSteering(v); got != want {
			t.Errorf("ignoresTxSteering(%q) = %v, want %v", v, got, want)
		}
	}
}

// CHECK reads the port's other_config (DEL and GC do not ask for it) and wants hash; anything
// else is an error that names the port and the command that fixes it.
func TestCheckWantsHashTxSteering(t *testing.T) {
	for steering, ok := range map[string]bool{"hash": true, "thread": false, "": false} {
		pairs := []any{}
		if steering != "" {
			pairs = append(pairs, []any{otherConfigTxSteering, steering})
		}
		f := newFakeOVSDB(t, func(_ int, ops []map[string]any) fakeReply {
			return fakeReply{results: []any{map[string]any{"rows": []any{map[string]any{
				"name": "fsk1", "type": portType, "options": []any{"map", []any{}},
				"other_config": []any{"map", pairs}, "external_ids": []any{"map", []any{}}}}}}}
		})
		o := &ovs{path: f.path}
		port, err := o.findPort(context.Background(), "fsk1")
		o.close()
		if err != nil {
			t.Fatal(err)
		}
		if cols := fmt.Sprint(f.txn(1)[0]["columns"]); !strings.Contains(cols, "other_config") {
			t.Errorf("CHECK's select does not read other_config: %s", cols)
		}
		err = checkTxSteering(port)
		if (err == nil) != ok {
			t.Errorf("steering %q: %v", steering, err)
		}
		if err != nil && !strings.Contains(err.Error(), "ovs-vsctl set Interface fsk1 other_config:tx-steering=hash") {
			t.Errorf("steering %q: the error does not say how to fix it: %v", steering, err)
		}
	}
	if cols := fmt.Sprint(selectInterfaces(nameIs("fsk1"))["columns"]); strings.Contains(cols, "other_config") {
		t.Errorf("DEL's and GC's select reads other_config: %s", cols)
	}
}
