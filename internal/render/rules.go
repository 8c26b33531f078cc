package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// celRules holds the CRD's CEL rules (x-kubernetes-validations), which package crdwalk does not
// evaluate: rules that relate fields to each other, and the sizes OpenAPI cannot state (a
// quantity's text, a map key). The kubectl plugin and the API server evaluate the rules
// themselves; these twins keep the spec snapshot a pod carries (which the supervisor reads
// without the API server's CEL libraries) to the same rules. TestRendererEnforcesEveryCELRule
// fails when a rule is added to the CRD without its twin here. s has the CRD's defaults applied
// and no profile or conditional default yet, as the API server evaluates the rules.
func celRules(s *fsv1.StackInstanceSpec) field.ErrorList {
	c := &rules{}
	root := field.NewPath("spec")
	d, dp := &s.DPDK, root.Child("dpdk")
	c.quantity(dp.Child("memory"), d.Memory)
	if d.NoHuge && d.Memory == nil {
		c.add(field.Required(dp.Child("memory"), "noHuge needs memory: without hugepages DPDK allocates exactly that much ordinary memory"))
	}
	for i := range s.Ports {
		c.port(s, i, root.Child("ports").Index(i))
	}
	for i := range s.VLANs {
		vp := root.Child("vlans").Index(i)
		c.addressing(&s.VLANs[i].Addressing, vp)
		// "" too: the CEL rule finds no port of that name either.
		if v := s.VLANs[i].Port; !hasPort(s, v) {
			c.add(field.NotFound(vp.Child("port"), v))
		}
	}
	if k := s.KNI; k != nil && k.Enabled && k.Method == "" {
		c.add(field.Required(root.Child("kni", "method"), "method is required when the exception path is enabled"))
	}
	c.quantity(root.Child("freebsd", "physMem"), s.FreeBSD.PhysMem)
	c.tunables(root.Child("freebsd", "boot"), s.FreeBSD.Boot, MaxBootValue)
	c.tunables(root.Child("freebsd", "sysctl"), s.FreeBSD.Sysctl, MaxSysctlValue)
	c.rssCheck(s, root.Child("rssCheck"))
	if s.Pcap != nil {
		c.quantity(root.Child("pcap", "fileSize"), s.Pcap.FileSize)
	}
	if sh := &s.Shim; sh.Polling && (sh.KernelEvent == nil || *sh.KernelEvent) {
		c.add(field.Invalid(root.Child("shim", "polling"), true,
			"polling and kernelEvent cannot be combined (polling is silently disabled with kernelEvent): set kernelEvent=false or polling=false"))
	}
	c.quantity(root.Child("dataplane", "hugePages", "amount"), s.Dataplane.HugePages.Amount)
	c.resources(&s.Dataplane.Resources, root.Child("dataplane", "resources"))
	c.program(s, root)
	return c.errs
}

type rules struct{ errs field.ErrorList }

func (c *rules) add(e *field.Error) { c.errs = append(c.errs, e) }

func (c *rules) port(s *fsv1.StackInstanceSpec, i int, p *field.Path) {
	ps := &s.Ports[i]
	if ps.VIPInterface != "" && ps.VIPs == nil && ps.VIPs6 == nil {
		c.add(field.Invalid(p.Child("vipInterface"), shorten(ps.VIPInterface), "vipInterface needs vips or vips6"))
	}
	d, dp := &ps.Device, p.Child("device")
	n := 0
	for _, set := range []bool{d.VhostUser != nil, d.PCI != nil, d.Bond != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		c.add(field.Invalid(dp, n, "set exactly one of vhostUser, pci or bond"))
	}
	if d.PCI != nil {
		c.pci(d.PCI, dp.Child("pci"))
	}
	if d.VhostUser != nil {
		c.mac(d.VhostUser.MAC, dp.Child("vhostUser", "mac"))
	}
	if d.Bond != nil {
		c.mac(d.Bond.MAC, dp.Child("bond", "mac"))
		for j := range d.Bond.Members {
			c.pci(&d.Bond.Members[j], dp.Child("bond", "members").Index(j))
		}
	}
	for j, k := range ps.Processes {
		if k >= s.Processes {
			c.add(field.Invalid(p.Child("processes").Index(j), k, fmt.Sprintf(
				"no such process: spec.processes is %d (ports[].processes may only name process indices below it)", s.Processes)))
		}
	}
	c.addressing(&ps.Addressing, p)
}

// mac holds the CRD's rule on a MAC: its first octet is even. The pattern (checked
// before) makes the second character that octet's low hex digit.
func (c *rules) mac(m string, p *field.Path) {
	if len(m) >= 2 && strings.ContainsRune("13579bBdDfF", rune(m[1])) {
		c.add(field.Invalid(p, shorten(m), "a multicast MAC (the first octet odd) cannot be a port's address: "+
			"bridges and switches drop frames sent from it; use a unicast MAC, e.g. 02:00:00:00:00:01"))
	}
}

func (c *rules) pci(d *fsv1.PCIDevice, p *field.Path) {
	if (d.Address != "") == (d.Resource != "") {
		c.add(field.Invalid(p, shorten(d.Address+d.Resource), "set exactly one of address or resource"))
	}
}

// addressing holds the rules a port and a VLAN share.
func (c *rules) addressing(a *fsv1.Addressing, p *field.Path) {
	if v4 := a.IPv4; v4 != nil && v4.From == fsv1.AddressStatic {
		vp := p.Child("ipv4")
		if v4.Address == "" {
			c.add(field.Required(vp.Child("address"), "address is required when from is Static"))
		}
		if v4.Gateway == "" {
			c.add(field.Required(vp.Child("gateway"), "gateway is required when from is Static: F-Stack refuses a port without one"))
		}
	}
	if v4 := a.IPv4; v4 != nil && v4.Pool != nil && v4.Pool.PrefixLength > MaxPrefixLengthIPv4 {
		c.add(field.Invalid(p.Child("ipv4", "pool", "prefixLength"), v4.Pool.PrefixLength, fmt.Sprintf("pool.prefixLength of an IPv4 pool is %d to %d", MinPrefixLength, MaxPrefixLengthIPv4)))
	}
	if v6 := a.IPv6; v6 != nil && v6.From == fsv1.AddressStatic && v6.Address == "" {
		c.add(field.Required(p.Child("ipv6", "address"), "address is required when from is Static"))
	}
}

func (c *rules) rssCheck(s *fsv1.StackInstanceSpec, p *field.Path) {
	r := s.RSSCheck
	if r == nil {
		return
	}
	ep := p.Child("entries")
	if r.Enabled != nil && *r.Enabled && len(r.Entries) == 0 {
		c.add(field.Required(ep, "an enabled rssCheck needs entries"))
	}
	for i := range r.Entries {
		if e := &r.Entries[i]; !hasPort(s, e.Port) {
			c.add(field.NotFound(ep.Index(i).Child("port"), e.Port))
		}
	}
}

// program holds the spec's two rules about spec.program: a program linked with libfstack has no
// shim and runs in its own container's image.
func (c *rules) program(s *fsv1.StackInstanceSpec, root *field.Path) {
	if s.Program == nil {
		return
	}
	if sh := &s.Shim; (sh.Enabled != nil && *sh.Enabled) || sh.KernelEvent != nil || sh.MultiSC != nil ||
		sh.ThreadSocket || sh.Polling || len(sh.Containers) > 0 {
		c.add(field.Invalid(root.Child("shim"), "", "a program linked with libfstack uses no shim: remove spec.shim (or leave only enabled: false)"))
	}
	if s.Dataplane.Image != "" {
		c.add(field.Invalid(root.Child("dataplane", "image"), shorten(s.Dataplane.Image),
			"with spec.program the dataplane is the program's container and runs its image; remove spec.dataplane.image"))
	}
}

// quantity checks a quantity's length. The rule bounds the text as written, which the parsed
// value no longer has; its canonical form is never longer than the text (a huge value prints
// clamped or with a suffix), so whatever this refuses the API server refuses too.
func (c *rules) quantity(p *field.Path, q *resource.Quantity) {
	if q == nil {
		return
	}
	if cp := q.DeepCopy(); len(cp.String()) > MaxQuantity { // String caches: never change the input
		c.add(field.TooLong(p, "", MaxQuantity))
	}
}

// tunables checks each FreeBSD tunable's name and value length (the CRD bounds how many). Keys
// are shortened in the path too: a hostile key must not fill the message either.
func (c *rules) tunables(p *field.Path, m map[string]string, maxValue int) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch {
		case utf8.RuneCountInString(k) > MaxTunableName:
			c.add(field.TooLong(p.Key(shorten(k)), "", MaxTunableName))
		case utf8.RuneCountInString(m[k]) > maxValue:
			c.add(field.TooLong(p.Key(k), "", maxValue))
		}
	}
}

// resources checks the dataplane's extra resources: how many limits, requests and claims, and
// the length of every name and quantity in them.
func (c *rules) resources(r *corev1.ResourceRequirements, p *field.Path) {
	for _, l := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		lp := p.Child(l.name)
		if len(l.list) > MaxResources {
			c.add(field.TooMany(lp, len(l.list), MaxResources))
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(l.list)) {
			if utf8.RuneCountInString(string(name)) > MaxResourceName {
				c.add(field.TooLong(lp.Key(shorten(string(name))), "", MaxResourceName))
				continue
			}
			q := l.list[name]
			c.quantity(lp.Key(string(name)), &q)
		}
	}
	cp := p.Child("claims")
	if len(r.Claims) > MaxResources {
		c.add(field.TooMany(cp, len(r.Claims), MaxResources))
		return
	}
	for i, cl := range r.Claims {
		if utf8.RuneCountInString(cl.Name) > MaxDNSLabel {
			c.add(field.TooLong(cp.Index(i).Child("name"), "", MaxDNSLabel))
		}
		if utf8.RuneCountInString(cl.Request) > MaxDNSLabel {
			c.add(field.TooLong(cp.Index(i).Child("request"), "", MaxDNSLabel))
		}
	}
}

func hasPort(s *fsv1.StackInstanceSpec, name string) bool {
	for i := range s.Ports {
		if s.Ports[i].Name == name {
			return true
		}
	}
	return false
}

// shorten keeps a hostile value from filling the error message (and the log it lands in).
func shorten(v string) string {
	const keep = 64
	if len(v) <= keep {
		return v
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(v[:keep], ""), len(v))
}
