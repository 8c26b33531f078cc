package inject

import (
	"cmp"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// fstack-cni binds a vhost-user port's anti-spoofing rules to the addresses the stack sends from,
// and to the VLANs it tags frames with; everything else from the port is dropped. Beyond the
// port's own address (which its CNI result reports) those are the StackInstance's VIPs and VLAN
// sub-interfaces, which only the injector knows: it passes them in the port's networks entry
// (cni-args, which Multus hands the plugin as args.cni) and, for a plugin chained in the node's
// conflist (no Multus), in the pod annotation podcontract.BindingAnnotation, which the runtime
// hands over through the pod-annotations capability. fstack-cni holds whatever it reads to the
// network and to the node's other ports: a pod that writes its own gains nothing.

// portBinding is what port i's rules bind beyond its CNI result: with own, its static
// addresses too (the annotation's reader, chained, has an IPAM lease as its result); and the
// DataNetwork the port is on (its dataNetwork, else defaultNetwork), whose plan fstack-cni holds
// all of it to.
func portBinding(s *fsv1.StackInstanceSpec, i int, own bool, defaultNetwork string) podcontract.PortBinding {
	ps := &s.Ports[i]
	b := podcontract.PortBinding{Network: cmp.Or(ps.DataNetwork, defaultNetwork)}
	if own {
		if v4 := ps.IPv4; v4 != nil && v4.From == fsv1.AddressStatic && v4.Address != "" {
			b.IPs = append(b.IPs, v4.Address)
		}
		if v6 := ps.IPv6; v6 != nil && v6.From == fsv1.AddressStatic && v6.Address != "" {
			b.IPs = append(b.IPs, v6.Address)
		}
	}
	add := func(a *fsv1.Addressing, sub bool) {
		if sub && a.IPv4 != nil && a.IPv4.Address != "" {
			b.Sources = append(b.Sources, withoutPrefix(a.IPv4.Address))
		}
		if sub && a.IPv6 != nil && a.IPv6.Address != "" {
			b.Sources = append(b.Sources, withoutPrefix(a.IPv6.Address))
		}
		b.Sources = append(b.Sources, a.VIPs...)
		b.Sources = append(b.Sources, a.VIPs6...)
	}
	add(&ps.Addressing, false)
	for j := range s.VLANs {
		if v := &s.VLANs[j]; v.Port == ps.Name {
			b.VLANs = append(b.VLANs, int(v.ID))
			add(&v.Addressing, true)
		}
	}
	return b
}

// CheckBindings refuses a spec whose vhost-user port binds more than fstack-cni can (its VIPs
// and VLAN addresses, its VLANs), at spec.ports[i] under path: every pod of it would fail at
// CNI ADD.
func CheckBindings(path *field.Path, spec *render.Spec) field.ErrorList {
	s := spec.Defaulted()
	var errs field.ErrorList
	for i := range s.Ports {
		if s.Ports[i].Device.VhostUser == nil {
			continue
		}
		p := path.Child("ports").Index(i)
		if err := portBinding(s, i, true, "").Check(p.String()); err != nil {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("fstack-cni cannot bind what this port sends from (%v); "+
				"give the port fewer VIPs or VLAN sub-interfaces", err)))
		}
	}
	return errs
}

func withoutPrefix(cidr string) string {
	addr, _, _ := strings.Cut(cidr, "/")
	return addr
}

// emptyBinding says b tells fstack-cni nothing: a binding that names only its network is not
// empty, since without it fstack-cni would hold the port to the node's default network.
func emptyBinding(b podcontract.PortBinding) bool {
	return len(b.IPs)+len(b.Sources)+len(b.VLANs) == 0 && b.Network == ""
}

// cniArgs is port i's networks entry's cni-args, or nil when the port binds nothing beyond its
// result (the entry's ips, or IPAM's) and names no network. The entry is marshalled with
// podcontract's codec (PortBinding.MarshalJSON); a binding it refuses is left out (see
// setBinding).
func cniArgs(s *fsv1.StackInstanceSpec, i int, defaultNetwork string) map[string]podcontract.PortBinding {
	b := portBinding(s, i, false, defaultNetwork)
	if emptyBinding(b) {
		return nil
	}
	if _, err := podcontract.EncodeBinding(b); err != nil {
		return nil
	}
	return map[string]podcontract.PortBinding{podcontract.CNIArgsBinding: b}
}

// setBinding writes the binding annotation of the spec's vhost-user ports, in place of any the
// pod brought.
func setBinding(pod *corev1.Pod, s *fsv1.StackInstanceSpec, defaultNetwork string) {
	all := map[string]podcontract.PortBinding{}
	for i := range s.Ports {
		if s.Ports[i].Device.VhostUser == nil {
			continue
		}
		if b := portBinding(s, i, true, defaultNetwork); !emptyBinding(b) {
			all[s.Ports[i].Attachment] = b
		}
	}
	raw, err := podcontract.EncodeBindings(all)
	// The codec refuses only values render.Prepare has refused already (addresses, VLAN ids),
	// so err is a bug; it fails closed: without a binding fstack-cni binds the port to its
	// own addresses alone, never to more.
	if len(all) == 0 || err != nil {
		delete(pod.Annotations, podcontract.BindingAnnotation)
		return
	}
	pod.Annotations[podcontract.BindingAnnotation] = raw
}
