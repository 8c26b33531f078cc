package netplan

import (
	"net/netip"
	"strings"
	"testing"
)

// quickstart is the chart's default network with the quickstart's grant.
func quickstart(t *testing.T) *Network {
	t.Helper()
	n, err := Parse(Spec{Name: "fstack-data", Subnets: []string{"10.56.0.0/24", "fd00:56::/64"},
		Gateways: []string{"10.56.0.1", "fd00:56::1"}, Reserved: []string{"10.56.0.2-10.56.0.9"},
		VLANs: []int{100}, MACPrefix: "02:5a",
		Grants: []Grant{{Namespaces: []string{"web"}, Ranges: []string{"10.56.0.0/26", "fd00:56::/120"}},
			{BySelector: true, Ranges: []string{"10.56.0.128-10.56.0.200"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTheRefusalsATenantGets(t *testing.T) {
	n := quickstart(t)
	web := n.Grant("web", func(int) bool { return false })
	other := n.Grant("other", func(int) bool { return true })
	for _, c := range []struct {
		name, got, want string
	}{
		{"the router's address", n.AddressProblem(netip.MustParsePrefix("10.56.0.1/24"), web), "gateway of DataNetwork fstack-data"},
		{"a reserved address", n.AddressProblem(netip.MustParsePrefix("10.56.0.5/24"), web), "reserved on DataNetwork fstack-data (10.56.0.2-10.56.0.9)"},
		{"another namespace's range", n.AddressProblem(netip.MustParsePrefix("10.56.0.130/24"), web), "not granted to this namespace"},
		{"outside the subnets", n.AddressProblem(netip.MustParsePrefix("10.57.0.10/24"), web), "outside DataNetwork fstack-data's subnets"},
		{"another prefix length", n.AddressProblem(netip.MustParsePrefix("10.56.0.10/16"), web), "prefix length 16"},
		{"a VIP outside the grant", n.SourceProblem(netip.MustParseAddr("10.96.0.10"), web), "not granted"},
		{"an ungranted VLAN", n.VLANProblem(200), "does not carry VLAN 200"},
		{"a MAC outside the policy", n.MACProblem("aa:bb:cc:00:00:01"), "MAC prefix 02:5a"},
		{"a gateway not the network's", n.GatewayProblem(netip.MustParseAddr("10.56.0.3")), "not a gateway"},
		{"a pool holding the router", n.RangeProblem(Range{netip.MustParseAddr("10.56.0.1"), netip.MustParseAddr("10.56.0.20")}, 24, web), "holds 10.56.0.1"},
		{"a pool partly another's", n.RangeProblem(Range{netip.MustParseAddr("10.56.0.50"), netip.MustParseAddr("10.56.0.70")}, 24, web), "not all granted"},
		{"the selector grant elsewhere", n.AddressProblem(netip.MustParsePrefix("10.56.0.20/24"), other), "not granted"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("%s: got %q, want it to say %q", c.name, c.got, c.want)
		}
	}
	for _, ok := range []string{
		n.AddressProblem(netip.MustParsePrefix("10.56.0.10/24"), web),
		n.AddressProblem(netip.MustParsePrefix("fd00:56::10/64"), web),
		n.AddressProblem(netip.MustParsePrefix("10.56.0.150/24"), other),
		n.VLANProblem(100), n.MACProblem("02:5a:00:00:00:01"), n.GatewayProblem(netip.MustParseAddr("10.56.0.1")),
		n.RangeProblem(Range{netip.MustParseAddr("10.56.0.10"), netip.MustParseAddr("10.56.0.50")}, 24, web),
	} {
		if ok != "" {
			t.Errorf("refused what the network grants: %s", ok)
		}
	}
}

// fstack-cni reads no namespace labels: a selector grant holds a port to its ranges only.
func TestWithoutLabelsASelectorGrantCounts(t *testing.T) {
	n := quickstart(t)
	if p := n.AddressProblem(netip.MustParsePrefix("10.56.0.150/24"), n.Grant("any", nil)); p != "" {
		t.Fatal(p)
	}
	if p := n.AddressProblem(netip.MustParsePrefix("10.56.0.20/24"), n.Grant("any", nil)); p == "" {
		t.Fatal("the web namespace's range was granted to another namespace")
	}
}

func TestDerivedMACsRefuseAnyMAC(t *testing.T) {
	n, err := Parse(Spec{Name: "n", Subnets: []string{"10.0.0.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := n.MACProblem("02:00:00:00:00:01"); !strings.Contains(p, "derives") {
		t.Fatalf("got %q", p)
	}
}

func TestParseRefusesWhatNoNetworkIs(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "n"}, "at least one subnet"},
		{Spec{Name: "n", Subnets: []string{"10.0.0.1/24"}}, "subnets[0]"},
		{Spec{Name: "n", Subnets: []string{"10.0.0.0/24"}, Gateways: []string{"10.0.1.1"}}, "gateways[0]"},
		{Spec{Name: "n", Subnets: []string{"10.0.0.0/24"}, VLANs: []int{0}}, "vlans[0]"},
		{Spec{Name: "n", Subnets: []string{"10.0.0.0/24"}, MACPrefix: "01"}, "locally administered"},
		{Spec{Name: "n", Subnets: []string{"10.0.0.0/24"}, MACPrefix: "02:00:00:00:00:00"}, "at most five"},
		{Spec{Name: "n", Subnets: []string{"10.0.0.0/24"}, Grants: []Grant{{Ranges: []string{"10.0.0.9-10.0.0.1"}}}}, "grants[0].ranges[0]"},
	} {
		if _, err := Parse(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.spec, err, c.want)
		}
	}
}

func TestRanges(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.5": "10.0.0.5", "10.0.0.0/30": "10.0.0.0-10.0.0.3", "10.0.0.7/30": "10.0.0.4-10.0.0.7",
		"10.0.0.1-10.0.0.9": "10.0.0.1-10.0.0.9", "fd00::/126": "fd00::-fd00::3",
	} {
		r, err := ParseRange(in)
		if err != nil || r.String() != want {
			t.Errorf("%s: got %v %v, want %s", in, r, err, want)
		}
	}
	g := Granted{{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.5")}, {netip.MustParseAddr("10.0.0.6"), netip.MustParseAddr("10.0.0.9")}}
	if !g.Covers(Range{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.9")}) {
		t.Error("two adjacent ranges do not cover what they hold together")
	}
	if g.Covers(Range{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.10")}) {
		t.Error("covers an address no range holds")
	}
}
