package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// portNetwork is the networks entry the injector writes for a port that names a network.
type portNetwork struct {
	podcontract.NetworkEntry
	port int // index in spec.ports, for messages
}

// portNetworks lists the entries of the spec's ports (defaults applied) that name a network;
// defaultNetwork is the DataNetwork of a port that names none, which its binding names.
func portNetworks(s *fsv1.StackInstanceSpec, defaultNetwork string) []portNetwork {
	var out []portNetwork
	for i := range s.Ports {
		ps := &s.Ports[i]
		if ps.Network == nil {
			continue
		}
		n := portNetwork{NetworkEntry: podcontract.NetworkEntry{Name: ps.Network.Name, Namespace: ps.Network.Namespace, Interface: ps.Attachment}, port: i}
		if v4 := ps.IPv4; v4 != nil && v4.From == fsv1.AddressStatic {
			n.IPs = append(n.IPs, v4.Address)
		}
		if v6 := ps.IPv6; v6 != nil && v6.From == fsv1.AddressStatic {
			n.IPs = append(n.IPs, v6.Address)
		}
		if vu := ps.Device.VhostUser; vu != nil {
			n.MAC = strings.ToLower(vu.MAC)
			n.CNIArgs = cniArgs(s, i, defaultNetwork)
		}
		out = append(out, n)
	}
	return out
}

func networksPath() *field.Path {
	return field.NewPath("metadata", "annotations").Key(podcontract.NetworksAnnotation)
}

// mergeNetworks returns the pod's networks annotation with the stack's entries: an entry of the
// pod for the same interface and network is replaced (the StackInstance's addresses and MAC are
// what the dataplane serves), one for another network or with other addresses or MAC is refused,
// and the rest of the pod's entries stay where they are, since Multus names an entry without an
// interface after its position (net1 for the first).
func (p *plan) mergeNetworks() (string, field.ErrorList) {
	if len(p.networks) == 0 {
		return "", nil
	}
	raw := p.pod.Annotations[podcontract.NetworksAnnotation]
	entries, err := podcontract.ParseNetworks(raw)
	if err != nil {
		return "", field.ErrorList{field.Invalid(networksPath(), shorten(raw), err.Error()+
			"; write it as Multus reads it: a JSON list of objects, or <namespace>/<name>@<interface> separated by commas")}
	}
	var errs field.ErrorList
	for _, want := range p.networks {
		i := slices.IndexFunc(entries, func(e podcontract.NetworkEntry) bool { return e.Interface == want.Interface })
		if i < 0 {
			entries = append(entries, want.entry())
			continue
		}
		conflicts := false
		for _, e := range entries[i:] {
			if msg := p.conflict(e, want); e.Interface == want.Interface && msg != "" {
				errs = append(errs, field.Invalid(networksPath(), shorten(raw), msg))
				conflicts = true
			}
		}
		if conflicts {
			continue
		}
		// The first keeps its place; a repeat of it (Multus would refuse two attachments of
		// one interface) goes.
		entries[i] = want.entry()
		entries = append(entries[:i+1], slices.DeleteFunc(entries[i+1:], func(e podcontract.NetworkEntry) bool { return e.Interface == want.Interface })...)
	}
	return podcontract.FormatNetworks(entries), errs
}

func (n portNetwork) entry() podcontract.NetworkEntry { return n.Encoded() }

// conflict says why the pod's entry e cannot stand for want, or "".
func (p *plan) conflict(e podcontract.NetworkEntry, want portNetwork) string {
	portField := fmt.Sprintf("spec.ports[%d]", want.port)
	switch {
	case e.Name != want.Name || p.namespaceOf(e.Namespace) != p.namespaceOf(want.Namespace):
		return fmt.Sprintf("it attaches network %s to interface %s, where StackInstance %q's %s.network puts network %s: "+
			"remove that entry (the injector adds the port's network) or change the port's attachment",
			p.networkName(e.Namespace, e.Name), e.Interface, p.stack, portField, p.networkName(want.Namespace, want.Name))
	case e.MAC != "" && !strings.EqualFold(e.MAC, want.MAC):
		return fmt.Sprintf("its entry for interface %s asks for MAC %s, but StackInstance %q's %s.device.vhostUser.mac is %q: "+
			"remove mac from the entry, or set it in the StackInstance", e.Interface, e.MAC, p.stack, portField, want.MAC)
	case len(e.IPs) > 0 && !slices.Equal(e.IPs, want.IPs):
		return fmt.Sprintf("its entry for interface %s asks for ips %v, but StackInstance %q's %s static addresses are %v: "+
			"remove ips from the entry, or set the addresses in the StackInstance", e.Interface, e.IPs, p.stack, portField, want.IPs)
	}
	return ""
}

func (p *plan) namespaceOf(ns string) string {
	if ns == "" {
		return p.pod.Namespace
	}
	return ns
}

func (p *plan) networkName(ns, name string) string {
	if ns = p.namespaceOf(ns); ns != "" {
		return ns + "/" + name
	}
	return name
}

// shorten keeps a hostile annotation from filling the error message.
func shorten(v string) string {
	const keep = 128
	if len(v) <= keep {
		return v
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(v[:keep], ""), len(v))
}

// setNetworks writes the merged annotation; a pod whose stack names no network keeps its own.
func setNetworks(pod *corev1.Pod, value string) {
	if value != "" {
		pod.Annotations[podcontract.NetworksAnnotation] = value
	}
}
