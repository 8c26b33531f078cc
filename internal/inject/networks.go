package inject

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// NetworksAnnotation is Multus's pod annotation that selects the pod's additional networks.
const NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"

// portNetwork is the networks entry the injector writes for a port that names a network. IPs and
// MAC reach the network's CNI plugin as runtimeConfig (the "ips" and "mac" capabilities), so it
// reports, and the pod's network-status shows, what the dataplane serves.
type portNetwork struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace,omitempty"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	// CNIArgs carries the port's VIPs and VLANs to fstack-cni (binding.go).
	CNIArgs map[string]podcontract.PortBinding `json:"cni-args,omitempty"`
	port    int                                // index in spec.ports, for messages
}

// portNetworks lists the entries of the spec's ports (defaults applied) that name a network.
func portNetworks(s *fsv1.StackInstanceSpec) []portNetwork {
	var out []portNetwork
	for i := range s.Ports {
		ps := &s.Ports[i]
		if ps.Network == nil {
			continue
		}
		n := portNetwork{Name: ps.Network.Name, Namespace: ps.Network.Namespace, Interface: ps.Attachment, port: i}
		if v4 := ps.IPv4; v4 != nil && v4.From == fsv1.AddressStatic {
			n.IPs = append(n.IPs, v4.Address)
		}
		if v6 := ps.IPv6; v6 != nil && v6.From == fsv1.AddressStatic {
			n.IPs = append(n.IPs, v6.Address)
		}
		if vu := ps.Device.VhostUser; vu != nil {
			n.MAC = strings.ToLower(vu.MAC)
			n.CNIArgs = cniArgs(s, i)
		}
		out = append(out, n)
	}
	return out
}

// userNetwork is what the injector reads of an entry the pod already has; the entry itself is
// kept byte for byte.
type userNetwork struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips"`
	MAC       string   `json:"mac"`
	raw       json.RawMessage
}

func networksPath() *field.Path {
	return field.NewPath("metadata", "annotations").Key(NetworksAnnotation)
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
	raw := p.pod.Annotations[NetworksAnnotation]
	entries, err := parseNetworks(raw)
	if err != nil {
		return "", field.ErrorList{field.Invalid(networksPath(), shorten(raw), err.Error()+
			"; write it as Multus reads it: a JSON list of objects, or <namespace>/<name>@<interface> separated by commas")}
	}
	var errs field.ErrorList
	for _, want := range p.networks {
		i := slices.IndexFunc(entries, func(e userNetwork) bool { return e.Interface == want.Interface })
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
		entries = append(entries[:i+1], slices.DeleteFunc(entries[i+1:], func(e userNetwork) bool { return e.Interface == want.Interface })...)
	}
	out := make([]json.RawMessage, len(entries))
	for i := range entries {
		out[i] = entries[i].raw
	}
	b, _ := json.Marshal(out)
	return string(b), errs
}

func (n portNetwork) entry() userNetwork {
	b, _ := json.Marshal(n)
	return userNetwork{Name: n.Name, Namespace: n.Namespace, Interface: n.Interface, IPs: n.IPs, MAC: n.MAC, raw: b}
}

// conflict says why the pod's entry e cannot stand for want, or "".
func (p *plan) conflict(e userNetwork, want portNetwork) string {
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

// parseNetworks reads the annotation the way Multus does: JSON when it holds any of [ { ",
// else comma-separated <namespace>/<name>@<interface>. An entry without an interface gets the
// name Multus gives it, net<position>.
func parseNetworks(raw string) ([]userNetwork, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var entries []userNetwork
	if strings.ContainsAny(raw, `[{"`) {
		var list []json.RawMessage
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			return nil, fmt.Errorf("not a JSON list: %w", err)
		}
		for i, r := range list {
			var e userNetwork
			if err := json.Unmarshal(r, &e); err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			e.raw = r
			entries = append(entries, e)
		}
	} else {
		for i, item := range strings.Split(raw, ",") {
			e, err := parseNetworkItem(strings.TrimSpace(item))
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			entries = append(entries, e)
		}
	}
	for i := range entries {
		if entries[i].Interface == "" {
			entries[i].Interface = "net" + strconv.Itoa(i+1)
		}
	}
	return entries, nil
}

var reNetworkLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// parseNetworkItem reads <namespace>/<name>@<interface> (namespace and interface optional) into
// the JSON entry Multus would make of it.
func parseNetworkItem(item string) (userNetwork, error) {
	var e userNetwork
	rest := item
	if ns, name, ok := strings.Cut(item, "/"); ok {
		e.Namespace, rest = strings.TrimSpace(ns), name
	}
	name, iface, _ := strings.Cut(rest, "@")
	e.Name, e.Interface = strings.TrimSpace(name), strings.TrimSpace(iface)
	switch {
	case !reNetworkLabel.MatchString(e.Name):
		return e, fmt.Errorf("network name %q is not a DNS-1123 label", shorten(e.Name))
	case e.Namespace != "" && !reNetworkLabel.MatchString(e.Namespace):
		return e, fmt.Errorf("namespace %q is not a DNS-1123 label", shorten(e.Namespace))
	case strings.ContainsAny(e.Interface, "/@ \t") || len(e.Interface) > 15:
		return e, fmt.Errorf("interface %q is not an interface name (at most 15 characters, no /, @ or spaces)", shorten(e.Interface))
	}
	e.raw, _ = json.Marshal(struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
		Interface string `json:"interface,omitempty"`
	}{e.Name, e.Namespace, e.Interface})
	return e, nil
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
		pod.Annotations[NetworksAnnotation] = value
	}
}
