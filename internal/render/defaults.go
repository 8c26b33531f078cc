package render

import (
	"k8s.io/apimachinery/pkg/api/resource"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// Defaults returns a copy of spec with every default applied: the same values the CRD's schema
// defaults set, so an offline render of a manifest matches what the API server stores, and the
// profile's (which the schema cannot set: an explicit value must win over them) before F-Stack's.
func Defaults(in *fsv1.StackInstanceSpec) *fsv1.StackInstanceSpec {
	s := in.DeepCopy()
	applyProfile(s)
	if s.FStackVersion == "" {
		s.FStackVersion = fsv1.DefaultFStackVersion
	}
	if s.Processes == 0 {
		s.Processes = 1
	}
	defaultDPDK(&s.DPDK)
	for i := range s.Ports {
		defaultPort(&s.Ports[i])
	}
	for i := range s.VLANs {
		defaultAddressing(&s.VLANs[i].Addressing)
	}
	if s.RSSCheck != nil && s.RSSCheck.Enabled == nil {
		s.RSSCheck.Enabled = ptr(false)
	}
	if s.KNI != nil && s.KNI.Action == "" {
		s.KNI.Action = fsv1.KNIActionDefault
	}
	if s.Program != nil {
		// A program linked with libfstack replaces the adapter the shim talks to; the shim's
		// build flags stay unset, so the snapshot keeps to the CRD's rule that a program has
		// no shim settings.
		s.Shim.Enabled = ptr(false)
	} else {
		defaultShim(&s.Shim)
	}
	defaultDataplane(s)
	return s
}

func defaultDPDK(d *fsv1.DPDKSpec) {
	if d.Channels == 0 {
		d.Channels = 4
	}
	if d.PktTxDelayMicroseconds == nil {
		d.PktTxDelayMicroseconds = ptr[int32](100)
	}
	for _, b := range []**bool{&d.Promiscuous, &d.NUMA, &d.VLANStrip} {
		if *b == nil {
			*b = ptr(true)
		}
	}
}

func defaultPort(p *fsv1.PortSpec) {
	if p.Attachment == "" {
		p.Attachment = p.Name
	}
	defaultAddressing(&p.Addressing)
}

func defaultAddressing(a *fsv1.Addressing) {
	if a.IPv4 != nil && a.IPv4.From == "" {
		a.IPv4.From = fsv1.AddressStatic
	}
	if a.IPv6 != nil && a.IPv6.From == "" {
		a.IPv6.From = fsv1.AddressStatic
	}
}

func defaultShim(sh *fsv1.ShimSpec) {
	for _, b := range []**bool{&sh.Enabled, &sh.KernelEvent, &sh.MultiSC} {
		if *b == nil {
			*b = ptr(true)
		}
	}
}

func defaultDataplane(s *fsv1.StackInstanceSpec) {
	dp := &s.Dataplane
	if dp.Flavor == "" {
		dp.Flavor = fsv1.FlavorKubeFStack
	}
	if dp.HugePages.PageSize == "" {
		dp.HugePages.PageSize = fsv1.HugePages2Mi
		// Unpatched F-Stack cannot use vhost-user with 2 MiB pages (at most 8 memory regions).
		if dp.Flavor == fsv1.FlavorUpstream && hasVhostUser(s) {
			dp.HugePages.PageSize = fsv1.HugePages1Gi
		}
	}
	if dp.HugePages.Amount == nil {
		q := resource.MustParse("1Gi")
		dp.HugePages.Amount = &q
	}
}

func hasVhostUser(s *fsv1.StackInstanceSpec) bool {
	for i := range s.Ports {
		if s.Ports[i].Device.VhostUser != nil {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }
