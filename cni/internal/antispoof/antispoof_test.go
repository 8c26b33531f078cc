package antispoof

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/cni/internal/openflow"
)

// The legacy rules are exactly what fstack-cni set before ports recorded their addresses: the
// keeper puts those back for such a port after a restart. (Written as the ovs-ofctl input that
// set them then, which ofctlText renders the flow mods as.)
func TestLegacyOfctlIsUnchanged(t *testing.T) {
	rules, err := LegacyRules("fsk0123456789ab", "02:AA:bb:cc:dd:ee")
	if err != nil {
		t.Fatal(err)
	}
	want := `delete cookie=0x36a169c56b77279e/-1
delete in_port=7
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,arp,arp_sha=02:aa:bb:cc:dd:ee,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,icmp6,icmp_type=135,icmp_code=0,nd_sll=02:aa:bb:cc:dd:ee,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,icmp6,icmp_type=135,icmp_code=0,nd_sll=00:00:00:00:00:00,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,icmp6,icmp_type=136,icmp_code=0,nd_tll=02:aa:bb:cc:dd:ee,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,icmp6,icmp_type=136,icmp_code=0,nd_tll=00:00:00:00:00:00,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,priority=30,arp,actions=drop
add cookie=0x36a169c56b77279e,table=0,in_port=7,priority=30,icmp6,icmp_type=135,icmp_code=0,actions=drop
add cookie=0x36a169c56b77279e,table=0,in_port=7,priority=30,icmp6,icmp_type=136,icmp_code=0,actions=drop
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=20,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,priority=10,actions=drop
`
	if got := ofctlText(FlowMods("fsk0123456789ab", 7, rules)); got != want {
		t.Errorf("ovs-ofctl input:\n%s\nwant:\n%s", got, want)
	}
	for _, mac := range []string{"nonsense", "02:00:00:00:00:00:00:01"} {
		if _, err := LegacyRules("p", mac); err == nil {
			t.Errorf("MAC %q gave legacy rules", mac)
		}
		if _, err := Rules("p", Spec{MAC: mac}); err == nil {
			t.Errorf("MAC %q gave rules", mac)
		}
	}
}

// The flow mods are the same list: two deletes (cookie, ofport) and one add per rule under the
// port's cookie, each matching the ofport first and every prerequisite before the field that
// needs it, NORMAL exactly for the pass rules. (The node test compares what OVS then holds
// with what ADD made.)
func TestFlowModsFollowTheRules(t *testing.T) {
	rules, err := Rules("fsk0123456789ab", testSpec)
	if err != nil {
		t.Fatal(err)
	}
	mods := FlowMods("fsk0123456789ab", 7, rules)
	if len(mods) != len(rules)+2 {
		t.Fatalf("%d flow mods for %d rules", len(mods), len(rules))
	}
	cookie := Cookie("fsk0123456789ab")
	if d := mods[0]; d.Command != openflow.FlowDelete || d.Cookie != cookie || d.CookieMask != ^uint64(0) || len(d.Match) != 0 || d.Table != openflow.TableAll {
		t.Errorf("first mod %+v, want a delete of every rule with the cookie", d)
	}
	if d := mods[1]; d.Command != openflow.FlowDelete || d.CookieMask != 0 || len(d.Match) != 1 || d.Match[0].Field != openflow.FieldInPort || binary.BigEndian.Uint32(d.Match[0].Value) != 7 {
		t.Errorf("second mod %+v, want a delete of every rule on ofport 7", d)
	}
	for i, m := range mods[2:] {
		assertAddsRule(t, i, m, rules[i], cookie)
	}
}

// prerequisite is the field OpenFlow requires before each field the rules match on.
var prerequisite = map[uint8]uint8{openflow.FieldARPSHA: openflow.FieldEthType, openflow.FieldARPSPA: openflow.FieldEthType,
	openflow.FieldIPv4Src: openflow.FieldEthType, openflow.FieldIPv6Src: openflow.FieldEthType, openflow.FieldIPProto: openflow.FieldEthType,
	openflow.FieldICMPv6Type: openflow.FieldIPProto, openflow.FieldICMPv6Code: openflow.FieldIPProto,
	openflow.FieldNDSLL: openflow.FieldICMPv6Type, openflow.FieldNDTLL: openflow.FieldICMPv6Type, openflow.FieldNDTarget: openflow.FieldICMPv6Type}

// assertAddsRule asserts that flow mod i adds rule r under cookie, matching the ofport first and
// every prerequisite before the field that needs it, and passing the source stage only from
// the port's MAC.
func assertAddsRule(t *testing.T, i int, m openflow.FlowMod, r Rule, cookie uint64) {
	t.Helper()
	goTo := uint8(0)
	if r.Action == Next {
		goTo = r.Table + 1
	}
	if m.Command != openflow.FlowAdd || m.Cookie != cookie || m.Table != r.Table || m.Priority != r.Priority || m.Normal != (r.Action == Pass) || m.GotoTable != goTo {
		t.Errorf("mod %d %+v does not add rule %+v", i, m, r)
	}
	if m.Match[0].Field != openflow.FieldInPort {
		t.Errorf("mod %d does not match the ofport first", i)
	}
	seen := map[uint8]bool{}
	for _, f := range m.Match {
		if p, ok := prerequisite[f.Field]; ok && !seen[p] {
			t.Errorf("mod %d: field %d before its prerequisite %d", i, f.Field, p)
		}
		seen[f.Field] = true
		if f.Field == openflow.FieldEthSrc && net.HardwareAddr(f.Value).String() != "02:aa:bb:cc:dd:ee" {
			t.Errorf("mod %d passes source %s", i, net.HardwareAddr(f.Value))
		}
	}
	if r.Table == TableSource && (r.Action != Drop) != seen[openflow.FieldEthSrc] {
		t.Errorf("mod %d: only frames from the port's MAC may pass the source stage", i)
	}
}

func TestCookie(t *testing.T) {
	a, b := Cookie("fsk0123456789ab"), Cookie("fsk0123456789ac")
	if a == b || a != Cookie("fsk0123456789ab") || a>>63 != 0 || b>>63 != 0 {
		t.Errorf("cookies %#x %#x: want distinct per port, stable, top bit clear", a, b)
	}
}

var testSpec = Spec{MAC: "02:aa:bb:cc:dd:ee", VLANs: []uint16{100},
	Addrs: []netip.Addr{netip.MustParseAddr("10.99.0.10"), netip.MustParseAddr("2001:db8::10"), netip.MustParseAddr("10.99.0.50"), netip.MustParseAddr("10.100.0.10")}}

// frame is what the rules can see of a frame a pod sends.
type frame struct {
	vlan      int // 0: untagged
	src       string
	proto     Proto // AnyFrame: another EtherType
	sender    string
	target    string
	linkLayer string // "" absent (all zeros)
}

// verdict runs f through rules as OVS would: in each table the highest-priority match acts;
// table 0 without a match falls to the bridge's default NORMAL flow, other tables drop.
func verdict(rules []Rule, f frame) bool {
	table := uint8(0)
	for {
		var best *Rule
		for i := range rules {
			r := &rules[i]
			if r.Table == table && matches(r, f) && (best == nil || r.Priority > best.Priority) {
				best = r
			}
		}
		switch {
		case best == nil:
			return table == 0
		case best.Action == Next:
			table++
		default:
			return best.Action == Pass
		}
	}
}

func matches(r *Rule, f frame) bool {
	ll := f.linkLayer
	if ll == "" {
		ll = "00:00:00:00:00:00"
	}
	isICMPv6 := f.proto == NeighborSolicit || f.proto == NeighborAdvert || f.proto == RouterAdvert || f.proto == Redirect
	switch {
	case r.VLAN != AnyVLAN && r.VLAN != f.vlan,
		r.Source != nil && r.Source.String() != f.src,
		r.Proto != AnyFrame && r.Proto != f.proto && (r.Proto != IPv6 || !isICMPv6),
		r.Sender.IsValid() && r.Sender.String() != f.sender,
		r.Target.IsValid() && r.Target.String() != f.target,
		r.LinkLayer != nil && r.LinkLayer.String() != ll:
		return false
	}
	return true
}

const own, other = "02:aa:bb:cc:dd:ee", "02:fe:00:00:00:0a"

// legitFrames are what the stack of testSpec sends.
var legitFrames = map[string]frame{
	"gratuitous ARP for its address":     {src: own, proto: ARP, sender: "10.99.0.10", linkLayer: own},
	"ARP for its VIP":                    {src: own, proto: ARP, sender: "10.99.0.50", linkLayer: own},
	"ARP on its VLAN":                    {vlan: 100, src: own, proto: ARP, sender: "10.100.0.10", linkLayer: own},
	"IPv4 from its address":              {src: own, proto: IPv4, sender: "10.99.0.10"},
	"IPv4 from its VIP":                  {src: own, proto: IPv4, sender: "10.99.0.50"},
	"IPv6 from its address":              {src: own, proto: IPv6, sender: "2001:db8::10"},
	"NS from its address":                {src: own, proto: NeighborSolicit, sender: "2001:db8::10", target: "2001:db8::1", linkLayer: own},
	"NS from its link-local":             {src: own, proto: NeighborSolicit, sender: "fe80::aa:bbff:fecc:ddee", target: "fe80::1", linkLayer: own},
	"DAD NS for its address":             {src: own, proto: NeighborSolicit, sender: "::", target: "2001:db8::10"},
	"NA for its address":                 {src: own, proto: NeighborAdvert, sender: "2001:db8::10", target: "2001:db8::10", linkLayer: own},
	"NA for its address, without option": {src: own, proto: NeighborAdvert, sender: "fe80::aa:bbff:fecc:ddee", target: "2001:db8::10"},
}

// forgedFrames are what issue 31 found passing, and more; each with the port's own MAC unless
// it is the MAC that is forged.
var forgedFrames = map[string]frame{
	"gratuitous ARP claiming the gateway": {src: own, proto: ARP, sender: "10.99.0.1", linkLayer: own},
	"unsolicited NA claiming another":     {src: own, proto: NeighborAdvert, sender: "2001:db8::10", target: "2001:db8::1", linkLayer: own},
	"NA from a foreign source":            {src: own, proto: NeighborAdvert, sender: "2001:db8::1", target: "2001:db8::10", linkLayer: own},
	"NS from a foreign source":            {src: own, proto: NeighborSolicit, sender: "2001:db8::1", target: "2001:db8::99", linkLayer: own},
	"DAD NS for another's address":        {src: own, proto: NeighborSolicit, sender: "::", target: "2001:db8::1"},
	"IPv4 from a foreign source":          {src: own, proto: IPv4, sender: "10.99.0.77"},
	"IPv6 from a foreign source":          {src: own, proto: IPv6, sender: "2001:db8::77"},
	"frame tagged with another VLAN":      {vlan: 200, src: own, proto: IPv4, sender: "10.99.0.10"},
	"router advertisement":                {src: own, proto: RouterAdvert, sender: "fe80::aa:bbff:fecc:ddee"},
	"redirect":                            {src: own, proto: Redirect, sender: "fe80::aa:bbff:fecc:ddee"},
	"another EtherType":                   {src: own, proto: AnyFrame},
	"another MAC":                         {src: other, proto: IPv4, sender: "10.99.0.10"},
	"ARP naming another MAC inside":       {src: own, proto: ARP, sender: "10.99.0.10", linkLayer: other},
}

// The rules pass what the stack sends and drop each forged frame; today's (legacy, MAC-only)
// rules passed the forged frames that carry the port's MAC, which is what issue 31 reported.
func TestRulesBindAddressesVLANsAndDropRouterMessages(t *testing.T) {
	rules, err := Rules("fsk0123456789ab", testSpec)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := LegacyRules("fsk0123456789ab", own)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range legitFrames {
		if !verdict(rules, f) {
			t.Errorf("%s: dropped, want passed", name)
		}
	}
	legacyPassed := 0
	for name, f := range forgedFrames {
		if verdict(rules, f) {
			t.Errorf("%s: passed, want dropped", name)
		}
		if verdict(legacy, f) {
			legacyPassed++
		}
	}
	if legacyPassed < 8 {
		t.Errorf("the MAC-only rules passed %d forged frames; the evaluator is wrong", legacyPassed)
	}
	// Without VLANs the port is an access port; without IPv6 addresses no IPv6 passes.
	plain, err := Rules("p", Spec{MAC: own, Addrs: []netip.Addr{netip.MustParseAddr("10.99.0.10")}})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]frame{"tagged": legitFrames["ARP on its VLAN"], "priority-tagged": {vlan: 100, src: own, proto: IPv4, sender: "10.99.0.10"},
		"IPv6 link-local NS": legitFrames["NS from its link-local"]} {
		if verdict(plain, f) {
			t.Errorf("%s passed a port without VLANs or IPv6", name)
		}
	}
	if !verdict(plain, legitFrames["IPv4 from its address"]) {
		t.Error("a port without VLANs dropped its untagged IPv4")
	}
}

func TestRulesRefuseWhatCannotBeBound(t *testing.T) {
	for name, spec := range map[string]Spec{
		"multicast":   {MAC: own, Addrs: []netip.Addr{netip.MustParseAddr("224.0.0.1")}},
		"unspecified": {MAC: own, Addrs: []netip.Addr{netip.IPv4Unspecified()}},
		"VLAN 0":      {MAC: own, VLANs: []uint16{0}},
		"VLAN 4095":   {MAC: own, VLANs: []uint16{4095}},
		"too many":    {MAC: own, Addrs: make([]netip.Addr, MaxAddrs+1)},
	} {
		if _, err := Rules("p", spec); err == nil {
			t.Errorf("%s: rules made", name)
		}
	}
}

// The port's external_ids give back the spec ADD bound, so the keeper rebuilds the same rules;
// a port without the addresses key is a legacy one.
func TestSpecRoundTripsThroughExternalIDs(t *testing.T) {
	back, legacy, err := SpecFromIDs(testSpec.IDs())
	if err != nil || legacy || !reflect.DeepEqual(back, testSpec) {
		t.Errorf("spec back %+v legacy %v err %v, want %+v", back, legacy, err, testSpec)
	}
	empty := Spec{MAC: own}
	if back, legacy, err := SpecFromIDs(empty.IDs()); err != nil || legacy || back.MAC != own || len(back.Addrs) != 0 || len(back.VLANs) != 0 {
		t.Errorf("a port binding no address: %+v legacy %v err %v", back, legacy, err)
	}
	if _, legacy, _ := SpecFromIDs(map[string]string{ExternalIDMAC: own}); !legacy {
		t.Error("a port with a MAC and no addresses key is not legacy")
	}
	if _, _, err := SpecFromIDs(map[string]string{ExternalIDMAC: own, ExternalIDAddrs: "10.0.0.1,bogus"}); err == nil {
		t.Error("a malformed addresses key was read")
	}
}

// The link-local address is the modified EUI-64 one FreeBSD's stack gives the interface.
func TestLinkLocal(t *testing.T) {
	mac, _ := net.ParseMAC(own)
	if got := LinkLocal(mac).String(); got != "fe80::aa:bbff:fecc:ddee" {
		t.Errorf("link-local %s", got)
	}
}

// ofctlText writes flow mods as the ovs-ofctl add-flows input fstack-cni used to send, field by
// field from what each mod's match holds, so a test can state a rule set as its readers know it.
func ofctlText(mods []openflow.FlowMod) string {
	var b strings.Builder
	for _, m := range mods {
		f := map[uint8][]byte{}
		for _, o := range m.Match {
			f[o.Field] = o.Value
		}
		if m.Command == openflow.FlowDelete {
			if m.CookieMask != 0 {
				fmt.Fprintf(&b, "delete cookie=%#x/-1\n", m.Cookie)
			} else {
				fmt.Fprintf(&b, "delete in_port=%d\n", binary.BigEndian.Uint32(f[openflow.FieldInPort]))
			}
			continue
		}
		fmt.Fprintf(&b, "add cookie=%#x,table=%d,in_port=%d", m.Cookie, m.Table, binary.BigEndian.Uint32(f[openflow.FieldInPort]))
		if v, ok := f[openflow.FieldEthSrc]; ok {
			b.WriteString(",dl_src=" + net.HardwareAddr(v).String())
		}
		fmt.Fprintf(&b, ",priority=%d", m.Priority)
		b.WriteString(matchText(f))
		switch {
		case m.Normal:
			b.WriteString(",actions=NORMAL\n")
		case m.GotoTable != 0:
			fmt.Fprintf(&b, ",actions=goto_table:%d\n", m.GotoTable)
		default:
			b.WriteString(",actions=drop\n")
		}
	}
	return b.String()
}

// matchText is the part of an ovs-ofctl match after the priority, in ovs-ofctl's order.
func matchText(f map[uint8][]byte) string {
	var b strings.Builder
	if v, ok := f[openflow.FieldVLANVID]; ok {
		if id := binary.BigEndian.Uint16(v); id == 0 {
			b.WriteString(",vlan_tci=0x0000/0x1fff")
		} else {
			fmt.Fprintf(&b, ",dl_vlan=%d", id&^openflow.VLANPresent)
		}
	}
	ip := func(v []byte) string { a, _ := netip.AddrFromSlice(v); return a.String() }
	names := []struct {
		field uint8
		name  string
		text  func([]byte) string
	}{
		{openflow.FieldICMPv6Type, "icmp_type", func(v []byte) string { return fmt.Sprint(v[0]) }},
		{openflow.FieldICMPv6Code, "icmp_code", func(v []byte) string { return fmt.Sprint(v[0]) }},
		{openflow.FieldARPSPA, "arp_spa", ip}, {openflow.FieldIPv4Src, "nw_src", ip}, {openflow.FieldIPv6Src, "ipv6_src", ip},
		{openflow.FieldNDTarget, "nd_target", ip},
		{openflow.FieldARPSHA, "arp_sha", func(v []byte) string { return net.HardwareAddr(v).String() }},
		{openflow.FieldNDSLL, "nd_sll", func(v []byte) string { return net.HardwareAddr(v).String() }},
		{openflow.FieldNDTLL, "nd_tll", func(v []byte) string { return net.HardwareAddr(v).String() }},
	}
	switch t, ok := f[openflow.FieldEthType]; {
	case !ok:
	case f[openflow.FieldIPProto] != nil:
		b.WriteString(",icmp6")
	default:
		b.WriteString(map[uint16]string{0x0806: ",arp", 0x0800: ",ip", 0x86dd: ",ipv6"}[binary.BigEndian.Uint16(t)])
	}
	for _, n := range names {
		if v, ok := f[n.field]; ok {
			b.WriteString("," + n.name + "=" + n.text(v))
		}
	}
	return b.String()
}
