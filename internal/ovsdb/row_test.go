package ovsdb

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestUUIDs(t *testing.T) {
	cases := []struct {
		wire string
		want []string
		bad  bool
	}{
		{`["uuid","a"]`, []string{"a"}, false},
		{`["set",[["uuid","a"],["uuid","b"]]]`, []string{"a", "b"}, false},
		{`["set",[]]`, []string{}, false},
		{`["set",[["named-uuid","a"]]]`, nil, true},
		{`["map",[]]`, nil, true},
		{`"a"`, nil, true},
	}
	for _, c := range cases {
		got, err := Row{"ports": json.RawMessage(c.wire)}.UUIDs("ports")
		if (err != nil) != c.bad || (!c.bad && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("UUIDs(%s) = %v, %v; want %v (error %v)", c.wire, got, err, c.want, c.bad)
		}
	}
	if _, err := (Row{}).UUIDs("ports"); err == nil {
		t.Error("a missing column gave no error")
	}
}

func TestOptionalInt(t *testing.T) {
	for raw, want := range map[string]struct {
		n   int64
		set bool
		bad bool
	}{
		`7`: {7, true, false}, `["set",[]]`: {0, false, false}, `["set",[3]]`: {3, true, false},
		`"7"`: {bad: true}, `["set",[1,2]]`: {bad: true}, `["map",[]]`: {bad: true},
	} {
		n, set, err := Row{"ofport": json.RawMessage(raw)}.OptionalInt("ofport")
		if (err != nil) != want.bad || n != want.n || set != want.set {
			t.Errorf("%s: got %d %v %v, want %d %v bad=%v", raw, n, set, err, want.n, want.set, want.bad)
		}
	}
}

func TestBool(t *testing.T) {
	for raw, want := range map[string]struct{ b, bad bool }{
		`true`: {b: true}, `false`: {}, `"true"`: {bad: true}, `["set",[]]`: {bad: true},
	} {
		b, err := Row{"dpdk_initialized": json.RawMessage(raw)}.Bool("dpdk_initialized")
		if (err != nil) != want.bad || b != want.b {
			t.Errorf("%s: got %v %v, want %v bad=%v", raw, b, err, want.b, want.bad)
		}
	}
	if _, err := (Row{}).Bool("dpdk_initialized"); err == nil {
		t.Error("a missing column gave no error")
	}
}
