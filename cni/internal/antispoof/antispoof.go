// Package antispoof is the one description of a port's anti-spoofing OpenFlow rules and their one
// encoding as flow mods, which both fstack-cni (at ADD) and the flow keeper (after ovs-vswitchd
// restarts) send over OpenFlow: the rules a restart brings back are the ones ADD made, byte for
// byte.
package antispoof

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/cni/internal/openflow"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// What fstack-cni keeps on each of its OVS ports (Interface and Port external_ids), and what
// the keeper finds them by.
const (
	ExternalIDOwner = podcontract.OVSIDOwner
	Owner           = podcontract.OVSOwner
	// ExternalIDMAC is the MAC the port's rules pass. Ports made by an fstack-cni before it
	// have none, and the keeper cannot restore their rules (it says so).
	ExternalIDMAC = podcontract.OVSIDMAC
)

// Cookie tags the port's rules, so removal is exact (no other rule has it) and idempotent, and
// a port name's rules are found without its ofport, which OVS may give to another port later.
// The top bit stays clear: an all-ones cookie is reserved in OpenFlow 1.3+.
func Cookie(port string) uint64 {
	s := sha256.Sum256([]byte("kube-fstack.io/flows/" + port))
	return binary.BigEndian.Uint64(s[:8]) &^ (1 << 63)
}

// ExternalIDAddrs and ExternalIDVLANs are, beside ExternalIDMAC, what the port's rules are
// made of: the addresses it may send from (its own, its stack's VIPs and VLAN addresses;
// comma-separated) and the 802.1Q VLAN ids it may send tagged frames on (comma-separated; none:
// untagged only). ADD stores them with the port, and the keeper rebuilds the very same rules
// from them. A port without ExternalIDAddrs was made by an fstack-cni that bound the MAC alone
// (LegacyRules).
const (
	ExternalIDAddrs = podcontract.OVSIDAddrs
	ExternalIDVLANs = podcontract.OVSIDVLANs
)

// Limits on what one port's rules bind, so its rule count stays in the hundreds: podcontract's,
// whose binding codec refuses more in what the injector passes.
const (
	MaxAddrs = podcontract.MaxBoundAddrs
	MaxVLANs = podcontract.MaxBoundVLANs
)

// Spec is what a port's rules bind: its MAC, every address it may send from, and the tagged
// VLANs it may send on.
type Spec struct {
	MAC   string
	Addrs []netip.Addr
	VLANs []uint16
}

// IDs is the spec as the port's external_ids keep it.
func (s Spec) IDs() map[string]string {
	addrs := make([]string, len(s.Addrs))
	for i, a := range s.Addrs {
		addrs[i] = a.String()
	}
	vlans := make([]string, len(s.VLANs))
	for i, v := range s.VLANs {
		vlans[i] = strconv.Itoa(int(v))
	}
	return map[string]string{ExternalIDMAC: s.MAC, ExternalIDAddrs: strings.Join(addrs, ","), ExternalIDVLANs: strings.Join(vlans, ",")}
}

// SpecFromIDs reads a port's spec back from its external_ids. legacy says the port has no
// ExternalIDAddrs: an older fstack-cni made it, whose rules bound the MAC alone.
func SpecFromIDs(ids map[string]string) (s Spec, legacy bool, err error) {
	s.MAC = ids[ExternalIDMAC]
	raw, ok := ids[ExternalIDAddrs]
	if !ok {
		return s, true, nil
	}
	for _, f := range splitList(raw) {
		a, err := netip.ParseAddr(f)
		if err != nil {
			return s, false, fmt.Errorf("%s: %q is not an address", ExternalIDAddrs, f)
		}
		s.Addrs = append(s.Addrs, a)
	}
	for _, f := range splitList(ids[ExternalIDVLANs]) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return s, false, fmt.Errorf("%s: %q is not a VLAN id", ExternalIDVLANs, f)
		}
		s.VLANs = append(s.VLANs, uint16(v))
	}
	return s, false, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// The rules run in three stages, each a table: 0 admits untagged frames and those of the
// declared VLANs (and drops router advertisements and redirects, which only routers send);
// 1 admits ARP, IPv4 and IPv6 whose sender is the port's MAC and one of its addresses; 2 admits
// neighbour advertisements whose target is one of its addresses. Anything else is dropped by
// each stage's last rule, so a frame passes only when every stage admitted it. Stages keep the
// rule count linear in the addresses and VLANs: one table would need their cross product.
const (
	TableVLAN   = 0
	TableSource = 1
	TableTarget = 2
)

// Priorities above the bridge's default NORMAL flow (0, table 0).
const (
	prioRouterOnly = 60 // router advertisements and redirects: dropped before anything else
	prioBound      = 50 // ARP, ND and the VLAN admission: sender and link-layer address bound
	prioUnbound    = 45 // ARP and ND that matched no bound rule: dropped, not passed as IP
	prioSource     = 40 // IPv4 and IPv6 by source address
	prioDrop       = 10
	// The legacy (MAC-only) rule set's.
	prioLinkLayerOK = 40
	prioLinkLayer   = 30
	prioSourceOK    = 20
)

// Proto is the kind of frame a rule matches beyond its source.
type Proto uint8

// The kinds of frame rules tell apart.
const (
	AnyFrame Proto = iota
	ARP
	NeighborSolicit // ICMPv6 type 135, option source link-layer address
	NeighborAdvert  // ICMPv6 type 136, option target link-layer address
	IPv4
	IPv6
	RouterAdvert // ICMPv6 type 134
	Redirect     // ICMPv6 type 137
)

// Action is what a rule does with the frames it matches.
type Action uint8

// Drop is the zero Action.
const (
	Drop Action = iota
	Pass        // to OVS's NORMAL switching
	Next        // on to the next stage's table
)

// VLAN values of a rule: any frame, or only untagged ones; 1..4094 is that VLAN.
const (
	AnyVLAN  = -1
	Untagged = 0
)

// Rule is one flow on the port's ofport, under the port's cookie.
type Rule struct {
	Table    uint8
	Priority uint16
	VLAN     int // AnyVLAN, Untagged or a VLAN id
	// Source is the source MAC the frame must have; nil matches any.
	Source net.HardwareAddr
	Proto  Proto
	// Sender is the ARP sender IP (arp_spa) or the IP source; invalid matches any.
	Sender netip.Addr
	// Target is the ND target; invalid matches any.
	Target netip.Addr
	// LinkLayer is the address inside ARP (sender hardware address) or the ND option; nil does
	// not match on it. An all-zero one matches an absent ND option.
	LinkLayer net.HardwareAddr
	Action    Action
}

// Rules is the port's rule set for spec: every frame the port sends must carry the port's MAC
// as its source (and in ARP's sender hardware address and the ND link-layer options, when
// present), one of spec's addresses as its ARP sender, IPv4 or IPv6 source and as the target of
// its neighbour advertisements, and no VLAN tag but those of spec. Other EtherTypes, router
// advertisements and redirects are dropped.
func Rules(port string, spec Spec) ([]Rule, error) {
	hw, err := parseMAC(port, spec.MAC)
	if err != nil {
		return nil, err
	}
	if len(spec.Addrs) > MaxAddrs || len(spec.VLANs) > MaxVLANs {
		return nil, fmt.Errorf("anti-spoofing rules for port %s: %d addresses and %d VLANs, at most %d and %d", port, len(spec.Addrs), len(spec.VLANs), MaxAddrs, MaxVLANs)
	}
	v4, v6, err := byFamily(port, spec.Addrs)
	if err != nil {
		return nil, err
	}
	if len(v6) > 0 && !slices.Contains(v6, LinkLocal(hw)) {
		// The stack's IPv6 sends neighbour discovery from the link-local address its MAC gives
		// (EUI-64), which no one declares.
		v6 = append(v6, LinkLocal(hw))
	}
	rules, err := vlanStage(port, spec.VLANs)
	if err != nil {
		return nil, err
	}
	rules = append(rules, sourceStage(hw, v4, v6)...)
	return append(rules, targetStage(hw, v6)...), nil
}

func parseMAC(port, mac string) (net.HardwareAddr, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return nil, fmt.Errorf("anti-spoofing rules for port %s: MAC %q is not an Ethernet address", port, mac)
	}
	return hw, nil
}

// byFamily splits addrs into IPv4 and IPv6, each once, refusing any a port cannot send from.
func byFamily(port string, addrs []netip.Addr) (v4, v6 []netip.Addr, err error) {
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		switch {
		case !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.Zone() != "":
			return nil, nil, fmt.Errorf("anti-spoofing rules for port %s: %q is not a unicast address", port, a)
		case seen[a]:
			continue
		case a.Is4():
			v4 = append(v4, a)
		default:
			v6 = append(v6, a)
		}
		seen[a] = true
	}
	return v4, v6, nil
}

// vlanStage is table 0: router advertisements and redirects dropped, untagged frames and those
// of vlans on to the next stage, anything else dropped.
func vlanStage(port string, vlans []uint16) ([]Rule, error) {
	rules := []Rule{
		{Table: TableVLAN, Priority: prioRouterOnly, VLAN: AnyVLAN, Proto: RouterAdvert},
		{Table: TableVLAN, Priority: prioRouterOnly, VLAN: AnyVLAN, Proto: Redirect},
		{Table: TableVLAN, Priority: prioBound, VLAN: Untagged, Action: Next},
	}
	seen := map[uint16]bool{}
	for _, v := range vlans {
		if v < 1 || v > 4094 {
			return nil, fmt.Errorf("anti-spoofing rules for port %s: VLAN id %d is not 1..4094", port, v)
		}
		if !seen[v] {
			seen[v] = true
			rules = append(rules, Rule{Table: TableVLAN, Priority: prioBound, VLAN: int(v), Action: Next})
		}
	}
	return append(rules, Rule{Table: TableVLAN, Priority: prioDrop, VLAN: AnyVLAN}), nil
}

// sourceStage is table 1: ARP, ND and IP from the port's MAC and one of its addresses, with the
// port's MAC inside ARP and ND, pass (a neighbour advertisement on to the target stage); any
// other ARP or ND, and anything else, is dropped.
func sourceStage(hw net.HardwareAddr, v4, v6 []netip.Addr) []Rule {
	none := make(net.HardwareAddr, 6)
	src := func(r Rule) Rule { r.Table, r.VLAN, r.Source = TableSource, AnyVLAN, hw; return r }
	var rules []Rule
	for _, a := range v4 {
		rules = append(rules,
			src(Rule{Priority: prioBound, Proto: ARP, Sender: a, LinkLayer: hw, Action: Pass}),
			src(Rule{Priority: prioSource, Proto: IPv4, Sender: a, Action: Pass}))
	}
	for _, a := range v6 {
		rules = append(rules,
			src(Rule{Priority: prioBound, Proto: NeighborSolicit, Sender: a, LinkLayer: hw, Action: Pass}),
			src(Rule{Priority: prioBound, Proto: NeighborSolicit, Sender: a, LinkLayer: none, Action: Pass}),
			// Duplicate address detection: from the unspecified address, for an address of
			// the port's own, without the option.
			src(Rule{Priority: prioBound, Proto: NeighborSolicit, Sender: netip.IPv6Unspecified(), Target: a, LinkLayer: none, Action: Pass}),
			src(Rule{Priority: prioBound, Proto: NeighborAdvert, Sender: a, Action: Next}),
			src(Rule{Priority: prioSource, Proto: IPv6, Sender: a, Action: Pass}))
	}
	for _, p := range []Proto{ARP, NeighborSolicit, NeighborAdvert} {
		rules = append(rules, Rule{Table: TableSource, Priority: prioUnbound, VLAN: AnyVLAN, Proto: p})
	}
	return append(rules, Rule{Table: TableSource, Priority: prioDrop, VLAN: AnyVLAN})
}

// targetStage is table 2: a neighbour advertisement passes when its target is one of the port's
// addresses and its link-layer option the port's MAC or absent.
func targetStage(hw net.HardwareAddr, v6 []netip.Addr) []Rule {
	var rules []Rule
	for _, a := range v6 {
		for _, ll := range []net.HardwareAddr{hw, make(net.HardwareAddr, 6)} {
			rules = append(rules, Rule{Table: TableTarget, Priority: prioBound, VLAN: AnyVLAN, Proto: NeighborAdvert, Target: a, LinkLayer: ll, Action: Pass})
		}
	}
	return append(rules, Rule{Table: TableTarget, Priority: prioDrop, VLAN: AnyVLAN})
}

// LinkLocal is the IPv6 link-local address of mac by modified EUI-64 (RFC 4291 appendix A).
func LinkLocal(mac net.HardwareAddr) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15] = mac[0]^0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]
	return netip.AddrFrom16(b)
}

// LegacyRules is the rule set of a port made before ports recorded their addresses
// (ExternalIDAddrs): its source MAC and ARP/ND link-layer addresses only. The keeper puts these
// back for such a port after an OVS restart, as its ADD made them; recreating the pod gives it
// the full rules.
func LegacyRules(port, mac string) ([]Rule, error) {
	hw, err := parseMAC(port, mac)
	if err != nil {
		return nil, err
	}
	none := make(net.HardwareAddr, 6)
	r := func(prio uint16, src net.HardwareAddr, p Proto, ll net.HardwareAddr, pass bool) Rule {
		a := Drop
		if pass {
			a = Pass
		}
		return Rule{Priority: prio, VLAN: AnyVLAN, Source: src, Proto: p, LinkLayer: ll, Action: a}
	}
	return []Rule{
		r(prioLinkLayerOK, hw, ARP, hw, true),
		r(prioLinkLayerOK, hw, NeighborSolicit, hw, true),
		r(prioLinkLayerOK, hw, NeighborSolicit, none, true),
		r(prioLinkLayerOK, hw, NeighborAdvert, hw, true),
		r(prioLinkLayerOK, hw, NeighborAdvert, none, true),
		r(prioLinkLayer, nil, ARP, nil, false),
		r(prioLinkLayer, nil, NeighborSolicit, nil, false),
		r(prioLinkLayer, nil, NeighborAdvert, nil, false),
		r(prioSourceOK, hw, AnyFrame, nil, true),
		r(prioDrop, nil, AnyFrame, nil, false),
	}, nil
}

// RuleSet is port's rules: those of spec, or, for a legacy port (SpecFromIDs), the MAC-only
// rules its ADD set. ADD, CHECK and the keeper all take a port's rules from here.
func RuleSet(port string, spec Spec, legacy bool) ([]Rule, error) {
	if legacy {
		return LegacyRules(port, spec.MAC)
	}
	return Rules(port, spec)
}

var (
	linkLayerField = map[Proto]uint8{ARP: openflow.FieldARPSHA, NeighborSolicit: openflow.FieldNDSLL, NeighborAdvert: openflow.FieldNDTLL}
	icmpv6Type     = map[Proto]uint8{RouterAdvert: 134, NeighborSolicit: 135, NeighborAdvert: 136, Redirect: 137}
)

// FlowMods is the one encoding of a port's rules, which ADD and the keeper send in one atomic
// bundle: first the removal of the port's own rules from an earlier ADD (whose port may have
// had another ofport) and of whatever a collected port left on this ofport, then the rules.
func FlowMods(port string, ofport int64, rules []Rule) []openflow.FlowMod {
	cookie := Cookie(port)
	in := InPort(ofport)
	mods := append(Removal(port), openflow.FlowMod{Command: openflow.FlowDelete, Table: openflow.TableAll, Match: in})
	for _, r := range rules {
		mod := openflow.FlowMod{Command: openflow.FlowAdd, Table: r.Table, Cookie: cookie, Priority: r.Priority,
			Match: r.match(in), Normal: r.Action == Pass}
		if r.Action == Next {
			mod.GotoTable = r.Table + 1
		}
		mods = append(mods, mod)
	}
	return mods
}

// Removal removes every rule of port, found by its cookie on any ofport.
func Removal(port string) []openflow.FlowMod {
	return []openflow.FlowMod{{Command: openflow.FlowDelete, Table: openflow.TableAll, Cookie: Cookie(port), CookieMask: ^uint64(0)}}
}

// match is r's OXM match after in: every prerequisite (the EtherType, the IP protocol, the
// ICMPv6 type) before the field that needs it, as OpenFlow requires.
func (r Rule) match(in []openflow.OXM) []openflow.OXM {
	m := slices.Clone(in)
	if r.Source != nil {
		m = append(m, openflow.OXM{Field: openflow.FieldEthSrc, Value: r.Source})
	}
	switch {
	case r.VLAN == Untagged:
		m = append(m, openflow.OXM{Field: openflow.FieldVLANVID, Value: openflow.U16(0)})
	case r.VLAN > 0:
		m = append(m, openflow.OXM{Field: openflow.FieldVLANVID, Value: openflow.U16(openflow.VLANPresent | uint16(r.VLAN))})
	}
	switch r.Proto {
	case ARP:
		m = append(m, etherType(0x0806))
		m = r.appendSender(m, openflow.FieldARPSPA)
		return r.appendLinkLayer(m)
	case IPv4:
		return r.appendSender(append(m, etherType(0x0800)), openflow.FieldIPv4Src)
	case IPv6:
		return r.appendSender(append(m, etherType(0x86dd)), openflow.FieldIPv6Src)
	case NeighborSolicit, NeighborAdvert, RouterAdvert, Redirect:
		return r.icmpv6Match(append(m, etherType(0x86dd)))
	}
	return m
}

func (r Rule) icmpv6Match(m []openflow.OXM) []openflow.OXM {
	m = r.appendSender(m, openflow.FieldIPv6Src)
	m = append(m, openflow.OXM{Field: openflow.FieldIPProto, Value: openflow.U8(58)},
		openflow.OXM{Field: openflow.FieldICMPv6Type, Value: openflow.U8(icmpv6Type[r.Proto])})
	if r.Proto == NeighborSolicit || r.Proto == NeighborAdvert {
		m = append(m, openflow.OXM{Field: openflow.FieldICMPv6Code, Value: openflow.U8(0)})
	}
	if r.Target.IsValid() {
		m = append(m, openflow.OXM{Field: openflow.FieldNDTarget, Value: r.Target.AsSlice()})
	}
	return r.appendLinkLayer(m)
}

func etherType(t uint16) openflow.OXM {
	return openflow.OXM{Field: openflow.FieldEthType, Value: openflow.U16(t)}
}

func (r Rule) appendSender(m []openflow.OXM, field uint8) []openflow.OXM {
	if !r.Sender.IsValid() {
		return m
	}
	return append(m, openflow.OXM{Field: field, Value: r.Sender.AsSlice()})
}

func (r Rule) appendLinkLayer(m []openflow.OXM) []openflow.OXM {
	if r.LinkLayer == nil {
		return m
	}
	return append(m, openflow.OXM{Field: linkLayerField[r.Proto], Value: r.LinkLayer})
}

// InPort is the match that finds the rules on ofport, for a flow count.
func InPort(ofport int64) []openflow.OXM {
	return []openflow.OXM{{Field: openflow.FieldInPort, Value: openflow.U32(uint32(ofport))}}
}
