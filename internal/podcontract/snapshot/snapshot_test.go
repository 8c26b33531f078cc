package snapshot

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func poolSpec() *fsv1.StackInstanceSpec {
	return &fsv1.StackInstanceSpec{Ports: []fsv1.PortSpec{{Name: "data", Addressing: fsv1.Addressing{
		IPv4: &fsv1.IPv4Address{From: fsv1.AddressPool, Pool: &fsv1.IPPool{Ranges: []string{"10.56.0.10-10.56.0.20"}, PrefixLength: 24}, Gateway: "10.56.0.1"},
		IPv6: &fsv1.IPv6Address{From: fsv1.AddressStatic, Address: "2001:db8::10/64"},
	}}}}
}

// What Encode writes, Decode reads back unchanged, under the version Version names.
func TestRoundTrip(t *testing.T) {
	in := poolSpec()
	raw, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(raw, Version())
	if err != nil {
		t.Fatal(err)
	}
	if out.Ports[0].IPv4.Pool.Ranges[0] != "10.56.0.10-10.56.0.20" || out.Ports[0].IPv6.Address != "2001:db8::10/64" {
		t.Fatalf("decoded %+v", out.Ports[0])
	}
}

// A snapshot no injector wrote is refused: too large, repeated fields, not an object, another
// API version (before any of the spec is decoded).
func TestDecodeRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		raw, version, want string
	}{
		"too large":       {`{"x":"` + strings.Repeat("a", podcontract.MaxSpecSnapshot) + `"}`, "", "larger than"},
		"repeated field":  {`{"processes":1,"processes":64}`, "", `duplicate field "processes"`},
		"not an object":   {`[1]`, "", "not valid JSON"},
		"trailing data":   {`{} {}`, "", "not valid JSON"},
		"another version": {`not json`, "kubefstack.io/v1beta1", `"kubefstack.io/v1beta1", which this binary does not read`},
		"long version":    {`{}`, strings.Repeat("v", MaxVersionBytes+1), "more than 256 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode([]byte(tc.raw), tc.version); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
	if _, err := Decode([]byte(`{"processes":2,"futureKnob":1}`), "kubefstack.io/v1alpha1\n"); err != nil {
		t.Errorf("an unknown field (a newer operator's default) and a trailing newline are read: %v", err)
	}
}

// Encode refuses a snapshot over the bound with ErrTooLarge and says how large it is.
func TestEncodeBound(t *testing.T) {
	s := poolSpec()
	s.Ports[0].VIPs = []string{strings.Repeat("1", podcontract.MaxSpecSnapshot)}
	raw, err := Encode(s)
	if !errors.Is(err, ErrTooLarge) || len(raw) <= podcontract.MaxSpecSnapshot {
		t.Fatalf("want ErrTooLarge with the value, got %d bytes, %v", len(raw), err)
	}
}

// PinAddress turns the pool of the address's family into that static address, and leaves a port
// without such a pool as it is.
func TestPinAddress(t *testing.T) {
	s := poolSpec()
	if !PinAddress(s, 0, netip.MustParsePrefix("10.56.0.12/24")) {
		t.Fatal("the IPv4 pool was not pinned")
	}
	v4 := s.Ports[0].IPv4
	if v4.From != fsv1.AddressStatic || v4.Address != "10.56.0.12/24" || v4.Pool != nil || v4.Gateway != "10.56.0.1" {
		t.Fatalf("pinned %+v", v4)
	}
	for _, tc := range []struct {
		port int
		p    string
	}{{0, "2001:db8::11/64"}, {0, "10.56.0.13/24"}, {1, "10.56.0.13/24"}, {-1, "10.56.0.13/24"}} {
		if PinAddress(s, tc.port, netip.MustParsePrefix(tc.p)) {
			t.Errorf("port %d, %s: pinned a port without a pool of that family", tc.port, tc.p)
		}
	}
	if s.Ports[0].IPv6.Address != "2001:db8::10/64" || s.Ports[0].IPv4.Address != "10.56.0.12/24" {
		t.Errorf("a refused pin changed the spec: %+v", s.Ports[0])
	}
}
