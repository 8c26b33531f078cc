package podcontract

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var sampleBinding = PortBinding{IPs: []string{"10.99.0.10/24", "2001:db8::10/64"}, Sources: []string{"10.99.0.50", "2001:db8::50"}, VLANs: []int{100, 200}, Network: "fstack-data"}

// The two carriers' forms are what fstack-cni reads: pinned byte for byte, and read back equal.
func TestBindingCarriersRoundTrip(t *testing.T) {
	sent := PortBinding{Sources: sampleBinding.Sources, VLANs: sampleBinding.VLANs, Network: sampleBinding.Network}
	one, err := EncodeBinding(sent)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"sources":["10.99.0.50","2001:db8::50"],"vlans":[100,200],"network":"fstack-data"}`; string(one) != want {
		t.Errorf("cni-args form %s, want %s", one, want)
	}
	back, err := DecodeBinding("args", one)
	if err != nil || !reflect.DeepEqual(back, sent) {
		t.Errorf("cni-args form read back as %+v, %v", back, err)
	}
	all := map[string]PortBinding{"net1": sampleBinding, "net2": {Sources: []string{"10.100.0.5"}}}
	ann, err := EncodeBindings(all)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"net1":{"ips":["10.99.0.10/24","2001:db8::10/64"],"sources":["10.99.0.50","2001:db8::50"],"vlans":[100,200],"network":"fstack-data"},"net2":{"sources":["10.100.0.5"]}}`; ann != want {
		t.Errorf("annotation form %s, want %s", ann, want)
	}
	if back, err := DecodeBindings("annotation", ann); err != nil || !reflect.DeepEqual(back, all) {
		t.Errorf("annotation read back as %+v, %v", back, err)
	}
}

// A networks entry marshalled whole (json.Marshal of its cni-args) writes the codec's form, and
// a binding the codec refuses does not reach it.
func TestNetworksEntryMarshalsTheCodecsForm(t *testing.T) {
	raw, err := json.Marshal(map[string]PortBinding{CNIArgsBinding: {Sources: []string{"10.99.0.50"}}})
	if err != nil || string(raw) != `{"kubefstack.io/binding":{"sources":["10.99.0.50"]}}` {
		t.Errorf("cni-args %s, %v", raw, err)
	}
	if _, err := json.Marshal(map[string]PortBinding{CNIArgsBinding: {VLANs: []int{0}}}); err == nil || !strings.Contains(err.Error(), "vlans[0]") {
		t.Errorf("a VLAN id 0 was marshalled (%v)", err)
	}
}

// The writer refuses malformed values as the reader does, but not counts: the reader refuses
// more than a port binds, naming the bound and the fix, where the pod's events show it.
func TestEncodeRefusesValuesNotCounts(t *testing.T) {
	for name, b := range map[string]PortBinding{
		"ips[0]":     {IPs: []string{"10.99.0.10"}},
		"sources[1]": {Sources: []string{"10.99.0.50", "fe80::1%eth0"}},
		"vlans[0]":   {VLANs: []int{4095}},
		"network":    {Network: "Fstack_Data"},
	} {
		if _, err := EncodeBinding(b); err == nil || !strings.Contains(err.Error(), CNIArgsBinding+"."+name) {
			t.Errorf("EncodeBinding of a bad %s: %v", name, err)
		}
		if _, err := EncodeBindings(map[string]PortBinding{"net1": b}); err == nil || !strings.Contains(err.Error(), BindingAnnotation+"[net1]."+name) {
			t.Errorf("EncodeBindings of a bad %s: %v", name, err)
		}
	}
	if _, err := EncodeBindings(map[string]PortBinding{"net/1": {}}); err == nil || !strings.Contains(err.Error(), "interface name") {
		t.Errorf("an interface key with a slash was written: %v", err)
	}
	many := PortBinding{}
	for i := range MaxBoundAddrs + 1 {
		many.Sources = append(many.Sources, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))
	}
	raw, err := EncodeBinding(many)
	if err != nil {
		t.Fatalf("more sources than a port binds were not written: %v", err)
	}
	if _, err := DecodeBinding("args", raw); err == nil || !strings.Contains(err.Error(), "args.sources: 257 addresses, at most 256") {
		t.Errorf("read back: %v", err)
	}
}

// Anything a pod may write there is refused unless it is exactly a binding, each error naming
// the carrier and the field.
func TestDecodeRefusesAnythingButABinding(t *testing.T) {
	long := `{"sources":["` + strings.Repeat("1", MaxBindingBytes) + `"]}`
	one := map[string]struct{ in, want string }{
		"unknown member":     {`{"sources":[],"vip":["10.0.0.1"]}`, `unknown member "vip"`},
		"member in any case": {`{"SOURCES":["10.0.0.1"]}`, `unknown member "SOURCES"`},
		"member twice":       {`{"sources":["10.0.0.1"],"sources":["10.0.0.2"]}`, `member "sources" given twice`},
		"trailing data":      {`{"sources":[]} {}`, "data after the binding"},
		"not an object":      {`["10.0.0.1"]`, "is not a binding"},
		"too deep":           {`{"sources":[[["10.0.0.1"]]]}`, "nested deeper"},
		"too long":           {long, fmt.Sprintf("%d bytes, at most %d", len(long), MaxBindingBytes)},
		"ip without prefix":  {`{"ips":["10.0.0.1"]}`, `.ips[0]: "10.0.0.1" is not an address with a prefix length`},
		"source with prefix": {`{"sources":["10.0.0.1/24"]}`, `.sources[0]: "10.0.0.1/24" is not an address`},
		"source with zone":   {`{"sources":["fe80::1%eth0"]}`, `.sources[0]: "fe80::1%eth0" is not an address`},
		"VLAN 0":             {`{"vlans":[0]}`, ".vlans[0]: 0 is not a VLAN id (1..4094)"},
		"VLAN 4095":          {`{"vlans":[1,4095]}`, ".vlans[1]: 4095 is not a VLAN id"},
		"VLAN not a number":  {`{"vlans":["100"]}`, "is not a binding"},
		"three ips":          {`{"ips":["10.0.0.1/24","10.0.0.2/24","10.0.0.3/24"]}`, ".ips: 3 addresses, at most 2"},
		"too many VLANs":     {`{"vlans":[` + strings.Repeat("1,", MaxBoundVLANs) + `1]}`, ".vlans: 129 VLANs, at most 128"},
		"network not a name": {`{"network":"../etc"}`, `.network: "../etc" is not a DataNetwork name`},
		"network too long":   {`{"network":"` + strings.Repeat("a", 64) + `"}`, "is not a DataNetwork name"},
		"network not text":   {`{"network":["a"]}`, "is not a binding"},
		"network twice":      {`{"network":"a","network":"b"}`, `member "network" given twice`},
	}
	for name, tc := range one {
		if _, err := DecodeBinding("args.cni.x", []byte(tc.in)); err == nil || !strings.HasPrefix(err.Error(), "args.cni.x") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	all := map[string]struct{ in, want string }{
		"interface twice":       {`{"net1":{},"net1":{"sources":["10.0.0.1"]}}`, `member "net1" given twice`},
		"not an interface":      {`{"../../x":{}}`, `ann[../../x]: "../../x" is not an interface name`},
		"member of a binding":   {`{"net1":{"Ips":["10.0.0.1/24"]}}`, `unknown member "Ips"`},
		"field of a binding":    {`{"net1":{"vlans":[5000]}}`, "ann[net1].vlans[0]: 5000 is not a VLAN id"},
		"too many interfaces":   {manyInterfaces(MaxPorts + 1), fmt.Sprintf("%d interfaces, at most %d", MaxPorts+1, MaxPorts)},
		"not an object of them": {`{"net1":[]}`, "is not a binding"},
	}
	for name, tc := range all {
		if _, err := DecodeBindings("ann", tc.in); err == nil || !strings.HasPrefix(err.Error(), "ann") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

func manyInterfaces(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"net%d":{}`, i)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Whatever the reader takes, the writer writes back as the same binding, and the reader takes
// that too: there is one form of each binding.
func FuzzDecodeBindings(f *testing.F) {
	f.Add(`{"net1":{"ips":["10.99.0.10/24"],"sources":["10.99.0.50","2001:db8::50"],"vlans":[100]}}`)
	f.Add(`{"net1":{},"net1":{}}`)
	f.Add(`{"net1":{"sources":[[[]]]}}`)
	f.Fuzz(func(t *testing.T, in string) {
		all, err := DecodeBindings("ann", in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ann") {
				t.Fatalf("error %q does not name the carrier", err)
			}
			return
		}
		out, err := EncodeBindings(all)
		if err != nil {
			t.Fatalf("%q was read but cannot be written: %v", in, err)
		}
		again, err := DecodeBindings("ann", out)
		if err != nil || !reflect.DeepEqual(normalized(again), normalized(all)) {
			t.Fatalf("%q read as %+v, written as %s, read back as %+v (%v)", in, all, out, again, err)
		}
	})
}

// normalized makes empty lists nil: the written form omits them.
func normalized(all map[string]PortBinding) map[string]PortBinding {
	out := map[string]PortBinding{}
	for k, b := range all {
		if len(b.IPs) == 0 {
			b.IPs = nil
		}
		if len(b.Sources) == 0 {
			b.Sources = nil
		}
		if len(b.VLANs) == 0 {
			b.VLANs = nil
		}
		out[k] = b
	}
	return out
}
