package render_test

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// Issue 30: a pool is one subnet of unicast addresses, each listed once; the order pods take
// them is the spec's.
func TestParsePool(t *testing.T) {
	path := field.NewPath("spec", "ports").Index(0).Child("ipv4", "pool")
	p, errs := render.ParsePool(&fsv1.IPPool{Ranges: []string{"10.56.0.40", "10.56.0.10-10.56.0.12", " 10.56.0.254 "}, PrefixLength: 24}, true, path)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	p.Addresses(func(a netip.Addr) bool { got = append(got, a.String()); return true })
	if strings.Join(got, " ") != "10.56.0.40 10.56.0.10 10.56.0.11 10.56.0.12 10.56.0.254" || p.Size() != 5 {
		t.Errorf("addresses %v (size %d), want the spec's order", got, p.Size())
	}
	if !p.Contains(netip.MustParseAddr("10.56.0.11")) || p.Contains(netip.MustParseAddr("10.56.0.13")) {
		t.Error("Contains disagrees with the ranges")
	}
	if p.Prefix(netip.MustParseAddr("10.56.0.11")) != "10.56.0.11/24" {
		t.Errorf("Prefix: %s", p.Prefix(netip.MustParseAddr("10.56.0.11")))
	}
	stop := 0
	p.Addresses(func(netip.Addr) bool { stop++; return false })
	if stop != 1 {
		t.Errorf("Addresses went on after yield returned false (%d calls)", stop)
	}

	for _, tc := range []struct {
		name   string
		pool   fsv1.IPPool
		v4     bool
		at, in string
	}{
		{"other family", fsv1.IPPool{Ranges: []string{"2001:db8::1"}, PrefixLength: 24}, true, "ranges[0]", "not an address of the pool's family"},
		{"backwards", fsv1.IPPool{Ranges: []string{"10.0.0.9-10.0.0.2"}, PrefixLength: 24}, true, "ranges[0]", "ends before it starts"},
		{"two subnets", fsv1.IPPool{Ranges: []string{"10.0.0.2", "10.0.1.2"}, PrefixLength: 24}, true, "ranges[1]", "a pool is one subnet"},
		{"network address", fsv1.IPPool{Ranges: []string{"10.0.0.0-10.0.0.5"}, PrefixLength: 24}, true, "ranges[0]", "network (10.0.0.0)"},
		{"broadcast address", fsv1.IPPool{Ranges: []string{"10.0.0.250-10.0.0.255"}, PrefixLength: 24}, true, "ranges[0]", "broadcast (10.0.0.255)"},
		{"overlap", fsv1.IPPool{Ranges: []string{"10.0.0.2-10.0.0.9", "10.0.0.5"}, PrefixLength: 24}, true, "ranges[1]", "overlaps"},
		{"too large", fsv1.IPPool{Ranges: []string{"2001:db8::1-2001:db8::ffff:ffff"}, PrefixLength: 64}, false, "ranges", "must have at most 65536"},
		{"v4 prefix", fsv1.IPPool{Ranges: []string{"10.0.0.2"}, PrefixLength: 33}, true, "prefixLength", "1 to 32"},
		{"multicast", fsv1.IPPool{Ranges: []string{"ff02::1"}, PrefixLength: 64}, false, "ranges[0]", "not a unicast address"},
		{"empty", fsv1.IPPool{PrefixLength: 24}, true, "ranges", "list the pool's addresses"},
	} {
		_, errs := render.ParsePool(&tc.pool, tc.v4, path)
		if len(errs) == 0 || errs[0].Field != path.String()+"."+tc.at || !strings.Contains(errs[0].Error(), tc.in) {
			t.Errorf("%s: want an error at %s.%s saying %q, got %v", tc.name, path, tc.at, tc.in, errs)
		}
	}
	// An overlap names the entry it overlaps, though an invalid entry came before it.
	_, errs = render.ParsePool(&fsv1.IPPool{Ranges: []string{"nope", "10.0.0.2-10.0.0.9", "10.0.0.5"}, PrefixLength: 24}, true, path)
	if len(errs) != 2 || errs[1].Field != path.String()+".ranges[2]" || !strings.Contains(errs[1].Error(), `overlaps ranges entry "10.0.0.2-10.0.0.9"`) {
		t.Errorf("want ranges[2] to overlap ranges[1], 10.0.0.2-10.0.0.9, got %v", errs)
	}
}

// The gateway is no address a pod may be given.
func TestPoolGatewayOutsideThePool(t *testing.T) {
	s := &fsv1.StackInstanceSpec{Ports: []fsv1.PortSpec{{Name: "data", Attachment: "net1",
		Device: fsv1.PortDevice{VhostUser: &fsv1.VhostUserDevice{}},
		Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: "10.0.0.5",
			Pool: &fsv1.IPPool{Ranges: []string{"10.0.0.2-10.0.0.9"}, PrefixLength: 24}}}}}}
	if errs := render.Validate(s); len(errs) == 0 || errs[0].Field != "spec.ports[0].ipv4.gateway" {
		t.Fatalf("want the refusal at spec.ports[0].ipv4.gateway, got %v", errs)
	}
	s.Ports[0].IPv4.Gateway = "10.0.0.1"
	if errs := render.Validate(s); len(errs) > 0 {
		t.Fatalf("a pool with its gateway outside: %v", errs)
	}
}
