// Package antispoof is the one description of a port's anti-spoofing OpenFlow rules, which both
// fstack-cni (through ovs-ofctl, at ADD) and the flow keeper (in OpenFlow, after ovs-vswitchd
// restarts) install: the two render the same list, so the rules a restart brings back are the
// ones ADD made.
package antispoof

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"strings"

	"github.com/kube-fstack/kube-fstack/cni/internal/openflow"
)

// What fstack-cni keeps on each of its OVS ports (Interface and Port external_ids), and what
// the keeper finds them by.
const (
	ExternalIDOwner = "kube-fstack.io/owner"
	Owner           = "fstack-cni"
	// ExternalIDMAC is the MAC the port's rules pass. Ports made by an fstack-cni before it
	// have none, and the keeper cannot restore their rules (it says so).
	ExternalIDMAC = "kube-fstack.io/mac"
)

// Cookie tags the port's rules, so removal is exact (no other rule has it) and idempotent, and
// a port name's rules are found without its ofport, which OVS may give to another port later.
// The top bit stays clear: an all-ones cookie is reserved in OpenFlow 1.3+.
func Cookie(port string) uint64 {
	s := sha256.Sum256([]byte("kube-fstack.io/flows/" + port))
	return binary.BigEndian.Uint64(s[:8]) &^ (1 << 63)
}

// Priorities above the bridge's default NORMAL flow (0): ARP and ND must carry the port's MAC
// inside too, everything else needs only the source MAC; the rest of the port's frames drop.
const (
	prioLinkLayerOK = 40
	prioLinkLayer   = 30
	prioSourceOK    = 20
	prioDrop        = 10
)

// Proto is the kind of frame a rule matches beyond its source.
type Proto uint8

// The frames whose payload names a link-layer address of its sender.
const (
	AnyFrame Proto = iota
	ARP
	NeighborSolicit // ICMPv6 type 135, option source link-layer address
	NeighborAdvert  // ICMPv6 type 136, option target link-layer address
)

// Rule is one flow on the port's ofport, in table 0 under the port's cookie.
type Rule struct {
	Priority uint16
	// Source is the source MAC the frame must have; nil matches any.
	Source net.HardwareAddr
	Proto  Proto
	// LinkLayer is the address inside ARP (sender hardware address) or the ND option; nil does
	// not match on it. An all-zero one matches an absent ND option.
	LinkLayer net.HardwareAddr
	// Pass hands the frame to NORMAL switching; otherwise it is dropped.
	Pass bool
}

// Rules is the port's rule set for its MAC, from most to least specific.
func Rules(port, mac string) ([]Rule, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return nil, fmt.Errorf("anti-spoofing rules for port %s: MAC %q is not an Ethernet address", port, mac)
	}
	none := make(net.HardwareAddr, 6)
	return []Rule{
		{Priority: prioLinkLayerOK, Source: hw, Proto: ARP, LinkLayer: hw, Pass: true},
		// ND options are optional: an absent one reads as all zeros.
		{Priority: prioLinkLayerOK, Source: hw, Proto: NeighborSolicit, LinkLayer: hw, Pass: true},
		{Priority: prioLinkLayerOK, Source: hw, Proto: NeighborSolicit, LinkLayer: none, Pass: true},
		{Priority: prioLinkLayerOK, Source: hw, Proto: NeighborAdvert, LinkLayer: hw, Pass: true},
		{Priority: prioLinkLayerOK, Source: hw, Proto: NeighborAdvert, LinkLayer: none, Pass: true},
		{Priority: prioLinkLayer, Proto: ARP},
		{Priority: prioLinkLayer, Proto: NeighborSolicit},
		{Priority: prioLinkLayer, Proto: NeighborAdvert},
		{Priority: prioSourceOK, Source: hw, Pass: true},
		{Priority: prioDrop},
	}, nil
}

// Ofctl is the ovs-ofctl add-flows input that puts rules on ofport: first the removal of the
// port's own rules from an earlier ADD (whose port may have had another ofport) and of whatever
// a collected port left on this ofport, then the rules.
func Ofctl(port string, ofport int64, rules []Rule) string {
	cookie := Cookie(port)
	head := fmt.Sprintf("cookie=%#x,table=0,in_port=%d", cookie, ofport)
	lines := []string{fmt.Sprintf("delete cookie=%#x/-1", cookie), fmt.Sprintf("delete in_port=%d", ofport)}
	for _, r := range rules {
		l := "add " + head
		if r.Source != nil {
			l += ",dl_src=" + r.Source.String()
		}
		l += fmt.Sprintf(",priority=%d", r.Priority)
		switch r.Proto {
		case ARP:
			l += ",arp"
		case NeighborSolicit:
			l += ",icmp6,icmp_type=135,icmp_code=0"
		case NeighborAdvert:
			l += ",icmp6,icmp_type=136,icmp_code=0"
		}
		if r.LinkLayer != nil {
			l += "," + linkLayerField[r.Proto] + "=" + r.LinkLayer.String()
		}
		if r.Pass {
			l += ",actions=NORMAL"
		} else {
			l += ",actions=drop"
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n") + "\n"
}

var linkLayerField = map[Proto]string{ARP: "arp_sha", NeighborSolicit: "nd_sll", NeighborAdvert: "nd_tll"}

// FlowMods is Ofctl's list as OpenFlow flow mods, for one atomic bundle.
func FlowMods(port string, ofport int64, rules []Rule) []openflow.FlowMod {
	cookie := Cookie(port)
	in := openflow.OXM{Field: openflow.FieldInPort, Value: openflow.U32(uint32(ofport))}
	mods := []openflow.FlowMod{
		{Command: openflow.FlowDelete, Table: openflow.TableAll, Cookie: cookie, CookieMask: ^uint64(0)},
		{Command: openflow.FlowDelete, Table: openflow.TableAll, Match: []openflow.OXM{in}},
	}
	for _, r := range rules {
		m := []openflow.OXM{in}
		if r.Source != nil {
			m = append(m, openflow.OXM{Field: openflow.FieldEthSrc, Value: r.Source})
		}
		switch r.Proto {
		case ARP:
			m = append(m, openflow.OXM{Field: openflow.FieldEthType, Value: openflow.U16(0x0806)})
			if r.LinkLayer != nil {
				m = append(m, openflow.OXM{Field: openflow.FieldARPSHA, Value: r.LinkLayer})
			}
		case NeighborSolicit, NeighborAdvert:
			typ, field := uint8(135), uint8(openflow.FieldNDSLL)
			if r.Proto == NeighborAdvert {
				typ, field = 136, openflow.FieldNDTLL
			}
			m = append(m,
				openflow.OXM{Field: openflow.FieldEthType, Value: openflow.U16(0x86dd)},
				openflow.OXM{Field: openflow.FieldIPProto, Value: openflow.U8(58)},
				openflow.OXM{Field: openflow.FieldICMPv6Type, Value: openflow.U8(typ)},
				openflow.OXM{Field: openflow.FieldICMPv6Code, Value: openflow.U8(0)})
			if r.LinkLayer != nil {
				m = append(m, openflow.OXM{Field: field, Value: r.LinkLayer})
			}
		}
		mods = append(mods, openflow.FlowMod{Command: openflow.FlowAdd, Cookie: cookie, Priority: r.Priority, Match: m, Normal: r.Pass})
	}
	return mods
}

// InPort is the match that finds the rules on ofport, for a flow count.
func InPort(ofport int64) []openflow.OXM {
	return []openflow.OXM{{Field: openflow.FieldInPort, Value: openflow.U32(uint32(ofport))}}
}
