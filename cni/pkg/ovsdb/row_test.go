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
