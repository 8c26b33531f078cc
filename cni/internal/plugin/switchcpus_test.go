package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

func TestParseCPUMask(t *testing.T) {
	ok := []struct {
		mask string
		want []int
	}{
		{"", nil},
		{"0x1", []int{0}},
		{"0x2", []int{1}},
		{"6", []int{1, 2}},
		{"0X0f", []int{0, 1, 2, 3}},
		{"0xA0", []int{5, 7}},
		{"0x0", nil},
		{"0x10000000000000000", []int{64}},
		{"0xf0000000000000000", []int{64, 65, 66, 67}},
		{"0x8000000000000001", []int{0, 63}},
		// 2048 digits: CPU 8191 is the last one a mask may name, and leading zeros name none.
		{"0x8" + strings.Repeat("0", 2047), []int{podcontract.MaxCPU}},
		{"0x0001" + strings.Repeat("0", 2047), []int{podcontract.MaxCPU - 3}},
	}
	for _, tc := range ok {
		got, err := parseCPUMask(tc.mask)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseCPUMask(%.20q) = %v, %v; want %v", tc.mask, got, err, tc.want)
		}
	}
	bad := []struct{ mask, want string }{
		{"zz", `"z" is not a hex digit`},
		{"0x2g", `"g" is not a hex digit`},
		{"0x", "no hex digits"},
		{" 0x2", `" " is not a hex digit`},
		{"-1", `"-" is not a hex digit`},
		{"0x0x2", `"x" is not a hex digit`},
		{"0x2\u00e9", "\"\u00e9\" is not a hex digit"},
		// CPU 8192: one past what Linux numbers.
		{"0x1" + strings.Repeat("0", 2048), "CPU 8192"},
	}
	for _, tc := range bad {
		got, err := parseCPUMask(tc.mask)
		if err == nil || got != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseCPUMask(%.20q) = %v, %v; want an error with %q", tc.mask, got, err, tc.want)
		}
	}
}

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
			log, err := os.ReadFile(filepath.Join(filepath.Dir(n.root), "fstack-cni.log"))
			if err != nil {
				t.Fatal(err)
			}
			var lines []logtest.Line
			if len(log) > 0 { // n.add stops before the command's own result line
				if lines, err = logtest.Parse(string(log), logging.FormatText, logging.ComponentCNI); err != nil {
					t.Fatal(err)
				}
			}
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
