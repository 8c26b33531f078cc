package plugin

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// withSwitchRow answers ADD's insert transaction as a server whose Open_vSwitch row has
// other_config other (and ovs_version 3.1.0).
func withSwitchRow(other map[string]string) func(int, []map[string]any) fakeReply {
	return func(_ int, ops []map[string]any) fakeReply {
		res := defaultResults(ops)
		if len(ops) == len(insertTxn) {
			pairs := []any{}
			for k, v := range other {
				pairs = append(pairs, []any{k, v})
			}
			res[slices.Index(insertTxn, "select Open_vSwitch")] = map[string]any{"rows": []any{map[string]any{
				"ovs_version": "3.1.0", "other_config": []any{"map", pairs}}}}
		}
		return fakeReply{results: res}
	}
}

// ADD reads other_config:pmd-cpu-mask in the transaction that makes the port and writes its
// CPUs into both device-info files. No mask is no claim; a mask that does not parse is no claim
// and a warning, never a failed ADD.
func TestAddWritesTheSwitchCPUs(t *testing.T) {
	cases := []struct {
		name  string
		other map[string]string
		want  []int
		warns bool
	}{
		{"mask", map[string]string{"pmd-cpu-mask": "0x6", "dpdk-init": "true"}, []int{1, 2}, false},
		{"wide mask", map[string]string{"pmd-cpu-mask": "10000000000000000"}, []int{64}, false},
		{"no mask", map[string]string{"dpdk-init": "true"}, nil, false},
		{"empty mask", map[string]string{"pmd-cpu-mask": ""}, nil, false},
		{"not a mask", map[string]string{"pmd-cpu-mask": "zz"}, nil, true},
		{"too large", map[string]string{"pmd-cpu-mask": "0x1" + strings.Repeat("0", 2048)}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeOVSDB(t, withSwitchRow(tc.other))
			n := newNode(t, f.path, nil)
			_, a, err := n.add()
			if err != nil {
				t.Fatal(err)
			}
			assertTxns(t, f, insertTxn)
			if cols := fmt.Sprint(f.txn(1)[slices.Index(insertTxn, "select Open_vSwitch")]["columns"]); !strings.Contains(cols, "other_config") {
				t.Errorf("the insert transaction does not read the Open_vSwitch row's other_config: %s", cols)
			}
			for _, p := range []string{a.devInfoInPodDir(), a.DevInfoFile} {
				info, err := podcontract.ReadDevInfo(p)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(info.SwitchCPUs, tc.want) {
					t.Errorf("%s: switchCPUs %v, want %v", p, info.SwitchCPUs, tc.want)
				}
			}
			log, lines := n.logLines(t)
			l, warned := logtest.Find(lines, "pmd-cpu-mask", map[string]string{"level": "WARN"})
			if warned != tc.warns {
				t.Fatalf("warned %v, want %v:\n%s", warned, tc.warns, log)
			}
			if warned && (l["pmdCPUMask"] != tc.other["pmd-cpu-mask"] || !strings.Contains(l["msg"], "cannot keep its lcores off the switch's PMD threads")) {
				t.Errorf("the warning does not name the mask and what it costs: %v", l)
			}
		})
	}
}
