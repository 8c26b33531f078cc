package render

import (
	"fmt"
	"net/netip"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// maxFIBs is the number of routing tables F-Stack compiles in (ROUTETABLES 16). A port's gateway
// goes into the table numbered by its port id, a VLAN's by its index in vlan_filter.
const maxFIBs = 16

func (p *plan) resolveAddresses(f *Facts) field.ErrorList {
	var errs field.ErrorList
	hasVLAN := map[string]bool{}
	for i := range p.spec.VLANs {
		hasVLAN[p.spec.VLANs[i].Port] = true
	}
	for i := range p.ports {
		pp := &p.ports[i]
		att := f.Attachments[pp.spec.Attachment]
		a := &pp.spec.Addressing
		var e field.ErrorList
		pp.v4, e = p.ipv4For(a.IPv4, att, pp.spec.Attachment, pp.path.Child("ipv4"))
		errs = append(errs, e...)
		pp.v6, e = p.ipv6For(a.IPv6, att, pp.spec.Attachment, pp.path.Child("ipv6"))
		errs = append(errs, e...)
		if a.IPv4 == nil && !hasVLAN[pp.spec.Name] {
			errs = append(errs, field.Required(pp.path.Child("ipv4"), "F-Stack needs an IPv4 address, "+
				"netmask, broadcast and gateway on every port: set ipv4 (static or from: Attachment), or "+
				"give the port VLANs"))
		}
		if pp.v4 != nil && pp.id >= maxFIBs {
			errs = append(errs, field.Invalid(pp.path.Child("ipv4", "gateway"), pp.v4.gateway, fmt.Sprintf(
				"this port gets DPDK port id %d, but F-Stack has only %d routing tables (one per port "+
					"id): use fewer ports", pp.id, maxFIBs)))
		}
		errs = append(errs, checkAddressing(a, pp.path)...)
		errs = append(errs, checkAttachmentSource(pp.spec, pp.path)...)
		errs = append(errs, checkSourceFields(a, pp.path)...)
	}
	return errs
}

// checkAttachmentSource refuses from: Attachment on a port that is no vhost-user attachment:
// only fstack-cni writes the device-info file in which the dataplane reads what the network's
// IPAM gave the pod, and sriov-cni (the CNI of an SR-IOV VF) writes none, so the dataplane
// would stop at start-up for want of an address.
func checkAttachmentSource(ps *fsv1.PortSpec, path *field.Path) field.ErrorList {
	if ps.Device.VhostUser != nil {
		return nil
	}
	var errs field.ErrorList
	refuse := func(child string) {
		errs = append(errs, field.Forbidden(path.Child(child, "from"), fmt.Sprintf(
			"port %q is a PCI device (SR-IOV VF or NIC), whose CNI plugin reports no address the dataplane can read: "+
				"from: Attachment works only on vhost-user ports; give this port from: Pool (each pod its own address) "+
				"or a static address, and leave IPAM out of its network", ps.Name)))
	}
	if ps.IPv4 != nil && ps.IPv4.From == fsv1.AddressAttachment {
		refuse("ipv4")
	}
	if ps.IPv6 != nil && ps.IPv6.From == fsv1.AddressAttachment {
		refuse("ipv6")
	}
	return errs
}

// checkSourceFields refuses a pool without from: Pool and an address with it (the CRD's rules,
// for `kubectl fstack render`, which no API server checks).
func checkSourceFields(a *fsv1.Addressing, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(family string, from fsv1.AddressSource, addr string, pool *fsv1.IPPool) {
		switch {
		case pool != nil && from != fsv1.AddressPool:
			errs = append(errs, field.Forbidden(path.Child(family, "pool"), "a pool is for from: Pool; set from: Pool or remove pool"))
		case addr != "" && from == fsv1.AddressPool:
			errs = append(errs, field.Forbidden(path.Child(family, "address"),
				"address is for from: Static; with from: Pool each pod takes its own address from pool: remove address"))
		}
	}
	if a.IPv4 != nil {
		check("ipv4", a.IPv4.From, a.IPv4.Address, a.IPv4.Pool)
	}
	if a.IPv6 != nil {
		check("ipv6", a.IPv6.From, a.IPv6.Address, a.IPv6.Pool)
	}
	return errs
}

// poolAddress checks a port's pool and returns the address the port renders with before a pod
// has one (Pool.First). The gateway may not be one of the pool's addresses.
func (p *plan) poolAddress(pool *fsv1.IPPool, gw string, v4 bool, path *field.Path) (string, field.ErrorList) {
	if pool == nil {
		return "", field.ErrorList{field.Required(path.Child("pool"), "from: Pool needs a pool: ranges and prefixLength")}
	}
	parsed, errs := p.pools.get(pool, v4, path.Child("pool"))
	if len(errs) > 0 {
		return "", errs
	}
	if g, err := netip.ParseAddr(gw); err == nil && parsed.Contains(g) {
		return "", field.ErrorList{field.Invalid(path.Child("gateway"), gw,
			"is one of the pool's addresses, which a pod could be given: take it out of pool.ranges")}
	}
	return parsed.Prefix(parsed.First()), nil
}

func (p *plan) ipv4For(spec *fsv1.IPv4Address, att Attachment, attName string, path *field.Path) (*ipv4Plan, field.ErrorList) {
	if spec == nil {
		return nil, nil
	}
	cidr, gw := sourced(spec.From, spec.Address, spec.Gateway, att, true)
	if spec.From == fsv1.AddressPool {
		var errs field.ErrorList
		if cidr, errs = p.poolAddress(spec.Pool, spec.Gateway, true, path); len(errs) > 0 {
			return nil, errs
		}
	}
	if spec.From == fsv1.AddressAttachment {
		if cidr == "" {
			return nil, field.ErrorList{field.Invalid(path.Child("from"), spec.From, fmt.Sprintf(
				"attachment %q reported no IPv4 address: give its network an IPAM section, or set a "+
					"static address", attName))}
		}
		if gw == "" {
			return nil, field.ErrorList{field.Required(path.Child("gateway"), fmt.Sprintf(
				"attachment %q reported no IPv4 gateway and F-Stack needs one: set gateway", attName))}
		}
	}
	var errs field.ErrorList
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil || !pfx.Addr().Is4() {
		errs = append(errs, field.Invalid(path.Child("address"), cidr,
			"must be an IPv4 address with a prefix length, e.g. 10.0.0.10/24"))
		return nil, errs
	}
	v := &ipv4Plan{addr: pfx.Addr().String(), netmask: netmask4(pfx.Bits())}
	v.broadcast = spec.Broadcast
	if v.broadcast == "" {
		v.broadcast = broadcast4(pfx)
	} else if !isIPv4(v.broadcast) {
		errs = append(errs, field.Invalid(path.Child("broadcast"), spec.Broadcast, "must be an IPv4 address"))
	}
	switch {
	case gw == "":
		errs = append(errs, field.Required(path.Child("gateway"),
			"F-Stack needs a gateway on every port and VLAN (it installs the default route of the port's FIB): set one, e.g. the subnet's .1"))
	case !isIPv4(gw):
		errs = append(errs, field.Invalid(path.Child("gateway"), gw, "must be an IPv4 address"))
	}
	v.gateway = gw
	return v, errs
}

func (p *plan) ipv6For(spec *fsv1.IPv6Address, att Attachment, attName string, path *field.Path) (*ipv6Plan, field.ErrorList) {
	if spec == nil {
		return nil, nil
	}
	cidr, gw := sourced(spec.From, spec.Address, spec.Gateway, att, false)
	if spec.From == fsv1.AddressPool {
		var errs field.ErrorList
		if cidr, errs = p.poolAddress(spec.Pool, spec.Gateway, false, path); len(errs) > 0 {
			return nil, errs
		}
	}
	if spec.From == fsv1.AddressAttachment && cidr == "" {
		return nil, field.ErrorList{field.Invalid(path.Child("from"), spec.From, fmt.Sprintf(
			"attachment %q reported no IPv6 address: give its network an IPv6 range, or set a "+
				"static address", attName))}
	}
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil || !pfx.Addr().Is6() || pfx.Addr().Is4In6() {
		return nil, field.ErrorList{field.Invalid(path.Child("address"), cidr,
			"must be an IPv6 address with a prefix length, e.g. 2001:db8::10/64")}
	}
	v := &ipv6Plan{addr: pfx.Addr().String(), prefix: pfx.Bits(), gateway: gw}
	if gw != "" {
		if a, err := netip.ParseAddr(gw); err != nil || !a.Is6() || a.Is4In6() {
			return v, field.ErrorList{field.Invalid(path.Child("gateway"), gw, "must be an IPv6 address")}
		}
	}
	return v, nil
}

// checkAddressing checks the VIP and policy-route lists of a port or VLAN.
func checkAddressing(a *fsv1.Addressing, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, checkAddrList(a.VIPs, path.Child("vips"), true)...)
	errs = append(errs, checkAddrList(a.VIPs6, path.Child("vips6"), false)...)
	for i, r := range a.PolicyRoutes {
		if pfx, err := netip.ParsePrefix(r); err != nil || !pfx.Addr().Is4() {
			errs = append(errs, field.Invalid(path.Child("policyRoutes").Index(i), r,
				"must be an IPv4 CIDR, e.g. 10.1.0.0/16"))
		}
	}
	return errs
}

func checkAddrList(list []string, path *field.Path, v4 bool) field.ErrorList {
	var errs field.ErrorList
	if len(list) > MaxVIPs {
		errs = append(errs, field.TooMany(path, len(list), MaxVIPs))
	}
	seen := map[string]bool{}
	for i, s := range list {
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil || a.Is4() != v4 || a.Is4In6() || a.Zone() != "":
			want := "an IPv4 address"
			if !v4 {
				want = "an IPv6 address"
			}
			errs = append(errs, field.Invalid(path.Index(i), s, "must be "+want))
		case seen[a.String()]:
			errs = append(errs, field.Duplicate(path.Index(i), s))
		}
		seen[a.String()] = true
	}
	return errs
}

// resolveVLANs orders VLANs by id (vlan_filter is sorted, and a VLAN's routing table is its index
// there) and resolves their addresses; VLAN addresses are always static.
func (p *plan) resolveVLANs() field.ErrorList {
	var errs field.ErrorList
	portID := map[string]int{}
	for i := range p.ports {
		portID[p.ports[i].spec.Name] = p.ports[i].id
	}
	for i := range p.spec.VLANs {
		vs := &p.spec.VLANs[i]
		path := field.NewPath("spec", "vlans").Index(i)
		id := portID[vs.Port] // a VLAN names a port: the CRD's rule, which Prepare holds the spec to
		vp := vlanPlan{spec: vs, path: path, portID: id}
		if vs.IPv4 == nil {
			errs = append(errs, field.Required(path.Child("ipv4"), "a VLAN needs an IPv4 address"))
		}
		errs = append(errs, checkStaticOnly(vs.IPv4, vs.IPv6, path)...)
		errs = append(errs, checkSourceFields(&vs.Addressing, path)...)
		var e field.ErrorList
		vp.v4, e = p.ipv4For(vs.IPv4, Attachment{}, "", path.Child("ipv4"))
		errs = append(errs, e...)
		vp.v6, e = p.ipv6For(vs.IPv6, Attachment{}, "", path.Child("ipv6"))
		errs = append(errs, e...)
		errs = append(errs, checkAddressing(&vs.Addressing, path)...)
		p.vlans = append(p.vlans, vp)
	}
	sort.SliceStable(p.vlans, func(a, b int) bool { return p.vlans[a].spec.ID < p.vlans[b].spec.ID })
	for idx, vp := range p.vlans {
		if idx >= maxFIBs && vp.v4 != nil && vp.v4.gateway != "" {
			errs = append(errs, field.Invalid(vp.path.Child("ipv4", "gateway"), vp.v4.gateway, fmt.Sprintf(
				"VLAN %d is number %d in vlan_filter, but F-Stack has only %d routing tables: at most "+
					"%d VLANs can have a gateway", vp.spec.ID, idx+1, maxFIBs, maxFIBs)))
		}
	}
	return errs
}

func checkStaticOnly(v4 *fsv1.IPv4Address, v6 *fsv1.IPv6Address, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v4 != nil && v4.From != fsv1.AddressStatic {
		errs = append(errs, field.NotSupported(path.Child("ipv4", "from"), v4.From, []string{string(fsv1.AddressStatic)}))
	}
	if v6 != nil && v6.From != fsv1.AddressStatic {
		errs = append(errs, field.NotSupported(path.Child("ipv6", "from"), v6.From, []string{string(fsv1.AddressStatic)}))
	}
	return errs
}

// sourced returns the address and gateway an interface uses: the spec's, or for an address from
// the attachment what its IPAM reported (a gateway set in the spec still wins).
func sourced(from fsv1.AddressSource, cidr, gw string, att Attachment, v4 bool) (string, string) {
	if from != fsv1.AddressAttachment {
		return cidr, gw
	}
	if gw == "" {
		gw = firstOfFamily(att.Gateways, v4)
	}
	return firstOfFamily(att.IPs, v4), gw
}

func firstOfFamily(cidrs []string, v4 bool) string {
	for _, c := range cidrs {
		s := c
		if pfx, err := netip.ParsePrefix(c); err == nil {
			if pfx.Addr().Is4() == v4 {
				return s
			}
			continue
		}
		if a, err := netip.ParseAddr(c); err == nil && a.Is4() == v4 {
			return s
		}
	}
	return ""
}

func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

func netmask4(bits int) string {
	m := ^uint32(0) << (32 - bits)
	if bits == 0 {
		m = 0
	}
	return fmt.Sprintf("%d.%d.%d.%d", m>>24, m>>16&0xff, m>>8&0xff, m&0xff)
}

func broadcast4(pfx netip.Prefix) string {
	b := pfx.Masked().Addr().As4()
	var host uint32
	if pfx.Bits() < 32 {
		host = ^uint32(0) >> pfx.Bits()
	}
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return fmt.Sprintf("%d.%d.%d.%d", v>>24, v>>16&0xff, v>>8&0xff, v&0xff)
}

func parsePrefix4(s string) (netip.Prefix, error) {
	pfx, err := netip.ParsePrefix(s)
	if err == nil && !pfx.Addr().Is4() {
		err = fmt.Errorf("%s is not IPv4", s)
	}
	return pfx, err
}
