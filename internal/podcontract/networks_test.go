package podcontract

import (
	"strings"
	"testing"
)

// Both of Multus's forms are read, an entry without an interface gets Multus's name for it, and
// a pod's JSON entry is kept byte for byte, fields kube-fstack does not read included.
func TestParseNetworks(t *testing.T) {
	got, err := ParseNetworks(`other/a@eth5, b`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Namespace != "other" || got[0].Name != "a" || got[0].Interface != "eth5" || got[1].Interface != "net2" ||
		string(got[1].Raw) != `{"name":"b"}` {
		t.Fatalf("short form: %+v", got)
	}
	raw := `[{"name":"x","interface":"net1","default-route":["10.0.0.1"]}]`
	got, err = ParseNetworks(raw)
	if err != nil || len(got) != 1 || FormatNetworks(got) != raw {
		t.Fatalf("JSON form: %+v, %v, formatted %s", got, err, FormatNetworks(got))
	}
	for _, bad := range []string{`[{`, `{"name":"x"}`, `a/b/c`, `Bad`, `a@` + strings.Repeat("x", 16), `[{"name":1}]`} {
		if _, err := ParseNetworks(bad); err == nil {
			t.Errorf("ParseNetworks(%q) was read", bad)
		}
	}
}

// What the injector writes is its entry's JSON.
func TestNetworkEntryEncoded(t *testing.T) {
	e := NetworkEntry{Name: "fstack-net", Interface: "net1", IPs: []string{"10.56.0.11/24"}}.Encoded()
	if string(e.Raw) != `{"name":"fstack-net","interface":"net1","ips":["10.56.0.11/24"]}` {
		t.Fatalf("encoded %s", e.Raw)
	}
}
