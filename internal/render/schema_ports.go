package render

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// The CRD's bounds on ports, devices and addresses, and the rules that tie VLANs, RSS entries and
// port processes to the rest of the spec.

func (c *bounds) ports(s *fsv1.StackInstanceSpec, p *field.Path) {
	if len(s.Ports) == 0 {
		c.add(field.Required(p, "a stack needs at least one port"))
	}
	c.count(p, len(s.Ports), false, 1, 16)
	names := make([]string, len(s.Ports))
	for i := range s.Ports {
		names[i] = s.Ports[i].Name
		c.port(&s.Ports[i], p.Index(i), processCount(s))
	}
	noDuplicates(c, p, names)
	for i := range s.VLANs {
		if v := s.VLANs[i].Port; v != "" && !hasPort(s, v) {
			c.add(field.NotFound(field.NewPath("spec", "vlans").Index(i).Child("port"), v))
		}
	}
}

func (c *bounds) port(ps *fsv1.PortSpec, p *field.Path, processes int32) {
	c.required(p.Child("name"), ps.Name, 32, rePortName)
	c.str(p.Child("attachment"), ps.Attachment, 15, reIfName)
	c.str(p.Child("ifName"), ps.IfName, 15, reIfName)
	c.str(p.Child("vipInterface"), ps.VIPInterface, 15, reIfName)
	if n := ps.Network; n != nil {
		np := p.Child("network")
		c.required(np.Child("name"), n.Name, maxDNSLabel, reDNSLabel)
		c.str(np.Child("namespace"), n.Namespace, maxDNSLabel, reDNSLabel)
	}
	if ps.VIPInterface != "" && ps.VIPs == nil && ps.VIPs6 == nil {
		c.add(field.Invalid(p.Child("vipInterface"), shorten(ps.VIPInterface), "vipInterface needs vips or vips6"))
	}
	c.device(&ps.Device, p.Child("device"))
	pp := p.Child("processes")
	c.count(pp, len(ps.Processes), ps.Processes != nil, 1, 64)
	for j, k := range ps.Processes {
		c.atLeast(pp.Index(j), int64(k), 0)
		if k >= processes {
			c.add(field.Invalid(pp.Index(j), k, fmt.Sprintf(
				"no such process: spec.processes is %d (ports[].processes may only name process indices below it)", processes)))
		}
	}
	noDuplicates(c, pp, ps.Processes)
	c.addressing(&ps.Addressing, p)
}

func (c *bounds) device(d *fsv1.PortDevice, p *field.Path) {
	n := 0
	for _, set := range []bool{d.VhostUser != nil, d.PCI != nil, d.Bond != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		c.add(field.Invalid(p, n, "set exactly one of vhostUser, pci or bond"))
	}
	if vu := d.VhostUser; vu != nil {
		vp := p.Child("vhostUser")
		c.nonZeroIn(vp.Child("queues"), int64(vu.Queues), 1, 255)
		c.nonZeroIn(vp.Child("queueSize"), int64(vu.QueueSize), 64, 32768)
		c.str(vp.Child("mac"), vu.MAC, 0, reMAC)
	}
	if d.PCI != nil {
		c.pci(d.PCI, p.Child("pci"))
	}
	if b := d.Bond; b != nil {
		bp := p.Child("bond")
		c.in(bp.Child("mode"), int64(b.Mode), 0, 6)
		mp := bp.Child("members")
		if len(b.Members) == 0 {
			c.add(field.Required(mp, "a bond needs at least one member"))
		}
		c.count(mp, len(b.Members), false, 1, 8)
		for j := range b.Members {
			c.pci(&b.Members[j], mp.Index(j))
		}
		c.optAtLeast(bp.Child("primaryMember"), b.PrimaryMember, 0)
		c.str(bp.Child("mac"), b.MAC, 0, reMAC)
		c.enum(bp.Child("xmitPolicy"), b.XmitPolicy, "l2", "l23", "l34")
		c.in(bp.Child("socketID"), int64(b.SocketID), 0, 255)
	}
}

func (c *bounds) pci(d *fsv1.PCIDevice, p *field.Path) {
	if (d.Address != "") == (d.Resource != "") {
		c.add(field.Invalid(p, shorten(d.Address+d.Resource), "set exactly one of address or resource"))
	}
	c.str(p.Child("address"), d.Address, 0, rePCIAddress)
	c.str(p.Child("resource"), d.Resource, 253, rePCIResource)
}

// addressing checks the layer-3 fields a port and a VLAN share.
func (c *bounds) addressing(a *fsv1.Addressing, p *field.Path) {
	if v4 := a.IPv4; v4 != nil {
		vp := p.Child("ipv4")
		c.addressFrom(vp.Child("from"), v4.From)
		c.str(vp.Child("address"), v4.Address, 18, nil)
		c.str(vp.Child("gateway"), v4.Gateway, 15, nil)
		c.str(vp.Child("broadcast"), v4.Broadcast, 15, nil)
		if v4.From != fsv1.AddressAttachment && v4.Address == "" {
			c.add(field.Required(vp.Child("address"), "address is required when from is Static"))
		}
		if v4.From != fsv1.AddressAttachment && v4.Gateway == "" {
			c.add(field.Required(vp.Child("gateway"), "gateway is required when from is Static: F-Stack refuses a port without one"))
		}
	}
	if v6 := a.IPv6; v6 != nil {
		vp := p.Child("ipv6")
		c.addressFrom(vp.Child("from"), v6.From)
		c.str(vp.Child("address"), v6.Address, 43, nil)
		c.str(vp.Child("gateway"), v6.Gateway, 39, nil)
		if v6.From != fsv1.AddressAttachment && v6.Address == "" {
			c.add(field.Required(vp.Child("address"), "address is required when from is Static"))
		}
	}
	c.strings(p.Child("vips"), a.VIPs, 64, 15, nil, true)
	c.strings(p.Child("vips6"), a.VIPs6, 64, 39, nil, true)
	c.nonZeroIn(p.Child("vipPrefixLength"), int64(a.VIPPrefixLength), 1, 128)
	c.strings(p.Child("policyRoutes"), a.PolicyRoutes, 64, 18, nil, true)
}

func (c *bounds) addressFrom(p *field.Path, from fsv1.AddressSource) {
	c.enum(p, string(from), string(fsv1.AddressStatic), string(fsv1.AddressAttachment))
}
