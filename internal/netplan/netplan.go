// Package netplan is a data network as the platform describes it (a DataNetwork's spec) and the
// checks both of its enforcers run against it: the admission webhook, on a StackInstance and on
// every pod it injects, and fstack-cni at ADD, from the copy the node was given. It depends on
// the standard library only, since fstack-cni links it.
package netplan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Spec is a data network in its wire form: what the webhook builds from a DataNetwork and the
// node config carries to fstack-cni.
type Spec struct {
	Name     string   `json:"name"`
	Subnets  []string `json:"subnets"`
	Gateways []string `json:"gateways,omitempty"`
	Reserved []string `json:"reserved,omitempty"`
	VLANs    []int    `json:"vlans,omitempty"`
	// MACPrefix is the prefix every MAC a stack sets must begin with; empty: the network derives
	// every MAC and a stack sets none.
	MACPrefix string  `json:"macPrefix,omitempty"`
	Grants    []Grant `json:"grants,omitempty"`
}

// Grant is one grant of a network's addresses to namespaces.
type Grant struct {
	Namespaces []string `json:"namespaces,omitempty"`
	// BySelector says the grant also selects namespaces by their labels. Only the webhook reads
	// labels: fstack-cni holds a port to such a grant's ranges whatever its namespace.
	BySelector bool     `json:"bySelector,omitempty"`
	Ranges     []string `json:"ranges"`
}

// Bounds of a Spec, the DataNetwork's own.
const (
	MaxSubnets  = 8
	MaxGateways = 8
	MaxReserved = 64
	MaxVLANs    = 128
	MaxGrants   = 64
	MaxRanges   = 64
	MaxEntry    = 79
)

// Range is an inclusive range of addresses of one family.
type Range struct{ First, Last netip.Addr }

// Contains says whether a is in r.
func (r Range) Contains(a netip.Addr) bool {
	return r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// ParseRange reads one address, a CIDR (all its addresses) or first-last.
func ParseRange(s string) (Range, error) {
	if len(s) > MaxEntry {
		return Range{}, fmt.Errorf("longer than %d characters", MaxEntry)
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Range{}, fmt.Errorf("not a CIDR: %v", err)
		}
		p = p.Masked()
		return Range{p.Addr(), lastOf(p)}, nil
	}
	firstS, lastS, isRange := strings.Cut(s, "-")
	first, err := parseAddr(firstS)
	if err != nil {
		return Range{}, err
	}
	if !isRange {
		return Range{first, first}, nil
	}
	last, err := parseAddr(lastS)
	switch {
	case err != nil:
		return Range{}, fmt.Errorf("the range's end: %w", err)
	case first.Is4() != last.Is4():
		return Range{}, fmt.Errorf("the range mixes IPv4 and IPv6")
	case last.Less(first):
		return Range{}, fmt.Errorf("the range ends before it starts")
	}
	return Range{first, last}, nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("not an IP address (write an address, a CIDR or first-last)")
	}
	return a.Unmap(), nil
}

// lastOf is the last address of p (masked).
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		keep := max(0, min(8, p.Bits()-8*i))
		b[i] |= byte(0xff >> keep)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Network is a parsed Spec.
type Network struct {
	Name      string
	Subnets   []netip.Prefix
	Gateways  []netip.Addr
	Reserved  []Range
	VLANs     []int
	MACPrefix []byte
	Grants    []ParsedGrant
}

// ParsedGrant is a parsed Grant.
type ParsedGrant struct {
	Namespaces []string
	BySelector bool
	Ranges     []Range
}

// Parse checks s and parses it. Its errors name the member at fault, for the platform's
// administrator: a tenant cannot fix a network.
func Parse(s Spec) (*Network, error) {
	n := &Network{Name: s.Name, VLANs: slices.Clone(s.VLANs)}
	if err := checkCounts(s); err != nil {
		return nil, err
	}
	for i, v := range s.Subnets {
		p, err := netip.ParsePrefix(v)
		if err != nil || p != p.Masked() {
			return nil, fmt.Errorf("subnets[%d] %q: not a subnet (a CIDR with no host bits, e.g. 10.56.0.0/24)", i, v)
		}
		n.Subnets = append(n.Subnets, p)
	}
	for i, v := range s.Gateways {
		a, err := parseAddr(v)
		if err != nil || !n.inSubnet(a) {
			return nil, fmt.Errorf("gateways[%d] %q: not an address of the network's subnets", i, v)
		}
		n.Gateways = append(n.Gateways, a)
	}
	for i, v := range s.Reserved {
		r, err := ParseRange(v)
		if err != nil {
			return nil, fmt.Errorf("reserved[%d] %q: %w", i, v, err)
		}
		n.Reserved = append(n.Reserved, r)
	}
	for i, id := range s.VLANs {
		if id < 1 || id > 4094 {
			return nil, fmt.Errorf("vlans[%d] %d: a VLAN id is 1 to 4094", i, id)
		}
	}
	if s.MACPrefix != "" {
		p, err := parseMACPrefix(s.MACPrefix)
		if err != nil {
			return nil, fmt.Errorf("macPrefix %q: %w", s.MACPrefix, err)
		}
		n.MACPrefix = p
	}
	for i, g := range s.Grants {
		pg, err := parseGrant(g)
		if err != nil {
			return nil, fmt.Errorf("grants[%d].%w", i, err)
		}
		n.Grants = append(n.Grants, pg)
	}
	return n, nil
}

func checkCounts(s Spec) error {
	for _, c := range []struct {
		name   string
		n, max int
	}{{"subnets", len(s.Subnets), MaxSubnets}, {"gateways", len(s.Gateways), MaxGateways},
		{"reserved", len(s.Reserved), MaxReserved}, {"vlans", len(s.VLANs), MaxVLANs}, {"grants", len(s.Grants), MaxGrants}} {
		if c.n > c.max {
			return fmt.Errorf("%s: %d entries, at most %d", c.name, c.n, c.max)
		}
	}
	if len(s.Subnets) == 0 {
		return fmt.Errorf("subnets: a network has at least one subnet")
	}
	return nil
}

func parseGrant(g Grant) (ParsedGrant, error) {
	pg := ParsedGrant{Namespaces: slices.Clone(g.Namespaces), BySelector: g.BySelector}
	if len(g.Ranges) > MaxRanges {
		return pg, fmt.Errorf("ranges: %d entries, at most %d", len(g.Ranges), MaxRanges)
	}
	for j, v := range g.Ranges {
		r, err := ParseRange(v)
		if err != nil {
			return pg, fmt.Errorf("ranges[%d] %q: %w", j, v, err)
		}
		pg.Ranges = append(pg.Ranges, r)
	}
	return pg, nil
}

func parseMACPrefix(s string) ([]byte, error) {
	var out []byte
	for part := range strings.SplitSeq(s, ":") {
		var b byte
		if len(part) != 2 {
			return nil, fmt.Errorf("write one to five octets, e.g. 02:5a:00")
		}
		if _, err := fmt.Sscanf(part, "%02x", &b); err != nil {
			return nil, fmt.Errorf("write one to five octets, e.g. 02:5a:00")
		}
		out = append(out, b)
	}
	if len(out) > 5 {
		return nil, fmt.Errorf("at most five octets: the last is the port's")
	}
	if out[0]&0x03 != 0x02 {
		return nil, fmt.Errorf("the first octet must be locally administered and unicast (its low two bits 10, e.g. 02)")
	}
	return out, nil
}

// Decode reads a Spec strictly (the node config's copy).
func Decode(data []byte) (Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Spec
	err := dec.Decode(&s)
	return s, err
}

func (n *Network) inSubnet(a netip.Addr) bool {
	_, ok := n.Subnet(a)
	return ok
}

// Subnet is the subnet of the network a is in.
func (n *Network) Subnet(a netip.Addr) (netip.Prefix, bool) {
	for _, p := range n.Subnets {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// IsGateway says whether a is one of the network's routers.
func (n *Network) IsGateway(a netip.Addr) bool { return slices.Contains(n.Gateways, a) }

// reserved is the reserved entry holding a, or "".
func (n *Network) reserved(a netip.Addr) string {
	for _, r := range n.Reserved {
		if r.Contains(a) {
			return r.String()
		}
	}
	return ""
}

// Granted is the ranges a network grants one namespace.
type Granted []Range

// Grant is what the network grants namespace ns; selected says whether grant i's selector
// selects ns (nil: no selector is read, and a selector grant counts as selecting: fstack-cni's
// view).
func (n *Network) Grant(ns string, selected func(i int) bool) Granted {
	var out Granted
	for i, g := range n.Grants {
		ok := slices.Contains(g.Namespaces, ns)
		if !ok && g.BySelector {
			ok = selected == nil || selected(i)
		}
		if ok {
			out = append(out, g.Ranges...)
		}
	}
	return out
}

// Contains says whether a is granted.
func (g Granted) Contains(a netip.Addr) bool {
	return slices.ContainsFunc(g, func(r Range) bool { return r.Contains(a) })
}

// Covers says whether every address of r is granted.
func (g Granted) Covers(r Range) bool {
	at := r.First
	for {
		next, ok := g.endOfRangeHolding(at)
		if !ok {
			return false
		}
		if next.Compare(r.Last) >= 0 {
			return true
		}
		at = next.Next()
	}
}

// endOfRangeHolding is the furthest last address of a granted range holding a.
func (g Granted) endOfRangeHolding(a netip.Addr) (netip.Addr, bool) {
	var best netip.Addr
	for _, r := range g {
		if r.Contains(a) && (!best.IsValid() || best.Less(r.Last)) {
			best = r.Last
		}
	}
	return best, best.IsValid()
}

// AddressProblem says why p may not be a port's own address on the network (outside its
// subnets, another prefix length, the subnet's network or broadcast address, a gateway, a
// reserved address, outside the grant), or "".
func (n *Network) AddressProblem(p netip.Prefix, g Granted) string {
	a := p.Addr().Unmap()
	subnet, ok := n.Subnet(a)
	switch {
	case !ok:
		return fmt.Sprintf("%s is outside DataNetwork %s's subnets (%s)", a, n.Name, n.subnetList())
	case p.Bits() != subnet.Bits():
		return fmt.Sprintf("%s has prefix length %d, but DataNetwork %s's subnet %s is /%d", p, p.Bits(), n.Name, subnet, subnet.Bits())
	case a.Is4() && subnet.Bits() < 31 && (a == subnet.Addr() || a == lastOf(subnet)):
		return fmt.Sprintf("%s is the network or broadcast address of %s", a, subnet)
	}
	return n.SourceProblem(a, g)
}

// SourceProblem says why a port may not send from a (a VIP, a VLAN's VIP): a gateway, a reserved
// address, outside the grant; or "".
func (n *Network) SourceProblem(a netip.Addr, g Granted) string {
	a = a.Unmap()
	if n.IsGateway(a) {
		return fmt.Sprintf("%s is a gateway of DataNetwork %s: a router's address is never a pod's", a, n.Name)
	}
	if r := n.reserved(a); r != "" {
		return fmt.Sprintf("%s is reserved on DataNetwork %s (%s)", a, n.Name, r)
	}
	if !g.Contains(a) {
		return fmt.Sprintf("%s is not granted to this namespace on DataNetwork %s (%s)", a, n.Name, g.describe())
	}
	return ""
}

// RangeProblem says why a pool's range r, of prefix length bits, may not be on the network, or "".
func (n *Network) RangeProblem(r Range, bits int, g Granted) string {
	subnet, ok := n.Subnet(r.First)
	switch {
	case !ok || !subnet.Contains(r.Last):
		return fmt.Sprintf("%s is not inside one of DataNetwork %s's subnets (%s)", r, n.Name, n.subnetList())
	case bits != subnet.Bits():
		return fmt.Sprintf("prefixLength %d, but DataNetwork %s's subnet %s is /%d", bits, n.Name, subnet, subnet.Bits())
	}
	for _, gw := range n.Gateways {
		if r.Contains(gw) {
			return fmt.Sprintf("%s holds %s, a gateway of DataNetwork %s", r, gw, n.Name)
		}
	}
	for _, res := range n.Reserved {
		if res.First.Compare(r.Last) <= 0 && r.First.Compare(res.Last) <= 0 {
			return fmt.Sprintf("%s overlaps %s, reserved on DataNetwork %s", r, res, n.Name)
		}
	}
	if !g.Covers(r) {
		return fmt.Sprintf("%s is not all granted to this namespace on DataNetwork %s (%s)", r, n.Name, g.describe())
	}
	return ""
}

// GatewayProblem says why gw may not be a port's gateway, or "".
func (n *Network) GatewayProblem(gw netip.Addr) string {
	gw = gw.Unmap()
	if len(n.Gateways) > 0 && !n.IsGateway(gw) {
		return fmt.Sprintf("%s is not a gateway of DataNetwork %s: use one of %s", gw, n.Name, addrList(n.Gateways))
	}
	if !n.inSubnet(gw) {
		return fmt.Sprintf("%s is outside DataNetwork %s's subnets (%s)", gw, n.Name, n.subnetList())
	}
	return ""
}

// VLANProblem says why id may not be used on the network, or "".
func (n *Network) VLANProblem(id int) string {
	if slices.Contains(n.VLANs, id) {
		return ""
	}
	if len(n.VLANs) == 0 {
		return fmt.Sprintf("DataNetwork %s carries no VLAN (untagged frames only)", n.Name)
	}
	return fmt.Sprintf("DataNetwork %s does not carry VLAN %d: it carries %s", n.Name, id, intList(n.VLANs))
}

// MACProblem says why a stack may not give a port mac on the network, or "".
func (n *Network) MACProblem(mac string) string {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return fmt.Sprintf("%q is not a MAC address", mac)
	}
	if len(n.MACPrefix) == 0 {
		return fmt.Sprintf("DataNetwork %s derives every port's MAC: remove the MAC, the port gets one", n.Name)
	}
	if !bytes.HasPrefix(hw, n.MACPrefix) {
		return fmt.Sprintf("%s does not begin with DataNetwork %s's MAC prefix %s", mac, n.Name, net.HardwareAddr(n.MACPrefix).String())
	}
	return ""
}

func (n *Network) subnetList() string {
	s := make([]string, len(n.Subnets))
	for i, p := range n.Subnets {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

func (g Granted) describe() string {
	if len(g) == 0 {
		return "it grants this namespace nothing"
	}
	s := make([]string, 0, min(len(g), 4))
	for i, r := range g {
		if i == 4 {
			s = append(s, "…")
			break
		}
		s = append(s, r.String())
	}
	return "granted: " + strings.Join(s, ", ")
}

func addrList(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func intList(is []int) string {
	s := make([]string, len(is))
	for i, v := range is {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}
