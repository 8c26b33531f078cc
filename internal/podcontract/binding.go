package podcontract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
)

// PortBinding is what fstack-cni binds a vhost-user port's anti-spoofing rules to beyond the
// addresses its result reports: the stack's VIPs and VLAN addresses (Sources) and the VLANs the
// port sends tagged frames on. The injector writes it from the StackInstance; a pod may write
// its own, so fstack-cni holds whatever it reads to the network's subnet and gateways and to
// the addresses other ports of the node hold.
//
// It travels in two carriers, each with its codec here, which are the only way the injector
// writes it and fstack-cni reads it: one port's binding in the Multus networks entry's cni-args
// (EncodeBinding, DecodeBinding) and every port's in the pod annotation (EncodeBindings,
// DecodeBindings).
type PortBinding struct {
	// IPs are the port's own addresses with their prefix length (10.99.0.10/24). Only the
	// BindingAnnotation carries them: on the Multus path they are the networks entry's ips.
	IPs []string `json:"ips,omitempty"`
	// Sources are the further addresses the stack sends from (VIPs, VLAN addresses and their
	// VIPs), without a prefix length.
	Sources []string `json:"sources,omitempty"`
	// VLANs are the 802.1Q VLAN ids of the stack's VLAN sub-interfaces on the port.
	VLANs []int `json:"vlans,omitempty"`
	// Network is the DataNetwork the port is on (spec.ports[].dataNetwork, or the injector's
	// default), a DNS-1123 label: fstack-cni holds the port to that network's plan as the node
	// config gives it, and to the node's default network when the binding names none.
	Network string `json:"network,omitempty"`
}

// CNIArgsBinding is the key of a PortBinding in a Multus networks entry's cni-args, which Multus
// hands to the network's plugin as args.cni of its config.
const CNIArgsBinding = "kubefstack.io/binding"

// BindingAnnotation is the pod annotation with a PortBinding per attachment (interface name),
// JSON: {"eth0": {"ips": [...], "sources": [...], "vlans": [...], "network": "..."}}. It reaches a chained
// fstack-cni (no Multus) through the runtime's pod-annotations capability (PodAnnotationsCapability).
const BindingAnnotation = "kubefstack.io/binding"

// PodAnnotationsCapability is the CNI capability under which containerd and CRI-O pass a pod's
// annotations in runtimeConfig to a plugin that declares it.
const PodAnnotationsCapability = "io.kubernetes.cri.pod-annotations"

// MaxBindingBytes bounds an encoded binding, in either carrier, before anything decodes it:
// 256 KiB is the API server's bound on all of a pod's annotations together, which holds both
// the binding annotation and the networks annotation that carries the cni-args, so no binding
// of a pod the API server accepted is longer, and a reader never parses more.
const MaxBindingBytes = 256 << 10

// What one port binds at most. MaxBoundAddrs and MaxBoundVLANs are fstack-cni's bounds on a
// port's rules (its own addresses and Sources together; its VLANs), which keep the rule count in
// the hundreds: a stack port has an address of each family, VIPs and VLAN sub-interfaces (64
// VIPs per family, 16 VLANs). A binding with more could never be bound, so the reader refuses it
// as it decodes. MaxBindingIPs is one static address per family, all a port has.
const (
	MaxBoundAddrs = 256
	MaxBoundVLANs = 128
	MaxBindingIPs = 2
)

// wireBinding is PortBinding's JSON without its MarshalJSON, so the codec can encode and
// decode the struct itself.
type wireBinding PortBinding

// MarshalJSON writes b as EncodeBinding does, so a networks entry marshalled whole carries the
// codec's form and never a malformed binding.
func (b PortBinding) MarshalJSON() ([]byte, error) { return EncodeBinding(b) }

// EncodeBinding is the cni-args form of one port's binding. It refuses a value the reader
// would refuse; not the counts, which the reader holds to what fstack-cni binds: the injector
// writes what the StackInstance declares, and fstack-cni's refusal at ADD names the bound and
// the fix where the pod's events show it.
func EncodeBinding(b PortBinding) ([]byte, error) {
	if err := b.checkValues(CNIArgsBinding); err != nil {
		return nil, err
	}
	return json.Marshal(wireBinding(b))
}

// EncodeBindings is the BindingAnnotation value of every port's binding, by interface name.
func EncodeBindings(all map[string]PortBinding) (string, error) {
	wire := make(map[string]wireBinding, len(all))
	for ifname, b := range all {
		field := BindingAnnotation + "[" + ifname + "]"
		if err := checkInterface(field, ifname); err != nil {
			return "", err
		}
		if err := b.checkValues(field); err != nil {
			return "", err
		}
		wire[ifname] = wireBinding(b)
	}
	raw, err := json.Marshal(wire)
	return string(raw), err
}

// DecodeBinding reads one port's binding from the cni-args form; name is the carrier as the
// reader's user knows it (args.cni.kubefstack.io/binding), which every error starts with. It
// refuses anything but exactly a binding: an unknown or repeated member, trailing data, more
// than MaxBindingBytes, a malformed value or more values than a port binds.
func DecodeBinding(name string, data []byte) (PortBinding, error) {
	var w wireBinding
	if err := decodeStrict(name, data, 0, &w); err != nil {
		return PortBinding{}, err
	}
	b := PortBinding(w)
	if err := b.check(name); err != nil {
		return PortBinding{}, err
	}
	return b, nil
}

// DecodeBindings reads the BindingAnnotation form, as DecodeBinding reads one binding; it also
// refuses a key that is not an interface name and more than MaxPorts of them.
func DecodeBindings(name, value string) (map[string]PortBinding, error) {
	var wire map[string]wireBinding
	if err := decodeStrict(name, []byte(value), 1, &wire); err != nil {
		return nil, err
	}
	if len(wire) > MaxPorts {
		return nil, fmt.Errorf("%s: %d interfaces, at most %d (one per port)", name, len(wire), MaxPorts)
	}
	all := make(map[string]PortBinding, len(wire))
	for ifname, w := range wire {
		field := name + "[" + shown(ifname) + "]"
		if err := checkInterface(field, ifname); err != nil {
			return nil, err
		}
		b := PortBinding(w)
		if err := b.check(field); err != nil {
			return nil, err
		}
		all[ifname] = b
	}
	return all, nil
}

// decodeStrict decodes data into v, holding it to MaxBindingBytes, one JSON value, no member
// v does not have and no member twice (checkMembers); bindingDepth is how many objects enclose
// a binding object (0: data is one).
func decodeStrict(name string, data []byte, bindingDepth int, v any) error {
	if len(data) > MaxBindingBytes {
		return fmt.Errorf("%s: %d bytes, at most %d: the injector writes a binding far smaller; remove it", name, len(data), MaxBindingBytes)
	}
	if err := checkMembers(data, bindingDepth); err != nil {
		return fmt.Errorf("%s: %w; the injector writes it: remove it", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s is not a binding (%s): %w; the injector writes it: remove it", name, bindingShape(bindingDepth), err)
	}
	return nil
}

func bindingShape(bindingDepth int) string {
	if bindingDepth == 0 {
		return `{"sources": [...], "vlans": [...], "network": "..."}`
	}
	return `{"<interface>": {"ips": [...], "sources": [...], "vlans": [...], "network": "..."}}`
}

// bindingMembers are a binding object's member names, exactly: encoding/json matches names
// without regard to case, and would take "IPS" for ips.
var bindingMembers = map[string]bool{"ips": true, "sources": true, "vlans": true, "network": true}

// maxBindingDepth is the deepest nesting a binding has (annotation object, binding object,
// list): a reader walks no deeper, whatever a pod wrote.
const maxBindingDepth = 3

// checkMembers walks data's tokens and refuses a member named twice in one object, a binding
// member under another name, anything nested deeper than a binding and trailing data:
// encoding/json keeps the last of two equal members, so a pod could show one value to a reader
// that keeps the first and another to fstack-cni.
func checkMembers(data []byte, bindingDepth int) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := walk(dec, 0, 0, bindingDepth); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the binding")
	}
	return nil
}

// walk reads one value; depth counts the enclosing lists and objects, objects the enclosing
// objects alone.
func walk(dec *json.Decoder, depth, objects, bindingDepth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxBindingDepth {
		return fmt.Errorf("nested deeper than a binding (%d levels)", maxBindingDepth)
	}
	if delim == '[' {
		for dec.More() {
			if err := walk(dec, depth+1, objects, bindingDepth); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return walkObject(dec, depth, objects, bindingDepth)
}

func walkObject(dec *json.Decoder, depth, objects, bindingDepth int) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		switch {
		case seen[key]:
			return fmt.Errorf("member %q given twice", shown(key))
		case objects == bindingDepth && !bindingMembers[key]:
			return fmt.Errorf("unknown member %q (a binding has ips, sources, vlans and network)", shown(key))
		}
		seen[key] = true
		if err := walk(dec, depth+1, objects+1, bindingDepth); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// Check holds b to what fstack-cni can bind on one port, naming field in its error: the
// injector asks it at admission, so a stack whose binding no port could hold is refused there,
// not at every pod's CNI ADD.
func (b PortBinding) Check(field string) error { return b.check(field) }

// check holds b to what a port binds: its values (checkValues) and its counts.
func (b PortBinding) check(field string) error {
	switch {
	case len(b.IPs) > MaxBindingIPs:
		return fmt.Errorf("%s.ips: %d addresses, at most %d (one per family)", field, len(b.IPs), MaxBindingIPs)
	case len(b.Sources) > MaxBoundAddrs:
		return fmt.Errorf("%s.sources: %d addresses, at most %d: give the stack fewer VIPs or VLANs on this port", field, len(b.Sources), MaxBoundAddrs)
	case len(b.VLANs) > MaxBoundVLANs:
		return fmt.Errorf("%s.vlans: %d VLANs, at most %d: give the stack fewer VLANs on this port", field, len(b.VLANs), MaxBoundVLANs)
	}
	return b.checkValues(field)
}

// checkValues refuses an ip that is not an address with its prefix length, a source that is
// not an address (a zone included: rules match addresses alone), a VLAN id outside 1..4094 and
// a network that is not a DataNetwork's name (a DNS-1123 label).
func (b PortBinding) checkValues(field string) error {
	if b.Network != "" && !IsDNSLabel(b.Network) {
		return fmt.Errorf("%s.network: %q is not a DataNetwork name (a DNS-1123 label of at most 63 characters)", field, shown(b.Network))
	}
	for i, s := range b.IPs {
		if _, err := netip.ParsePrefix(s); err != nil {
			return fmt.Errorf("%s.ips[%d]: %q is not an address with a prefix length (10.99.0.10/24)", field, i, shown(s))
		}
	}
	for i, s := range b.Sources {
		if a, err := netip.ParseAddr(s); err != nil || a.Zone() != "" {
			return fmt.Errorf("%s.sources[%d]: %q is not an address (10.99.0.50, 2001:db8::50)", field, i, shown(s))
		}
	}
	for i, v := range b.VLANs {
		if v < 1 || v > 4094 {
			return fmt.Errorf("%s.vlans[%d]: %d is not a VLAN id (1..4094)", field, i, v)
		}
	}
	return nil
}

// checkInterface refuses a key that is not an interface name as a StackInstance's
// spec.ports[].attachment is one: 1 to 15 of A-Z a-z 0-9 _ . -.
func checkInterface(field, ifname string) error {
	ok := len(ifname) >= 1 && len(ifname) <= 15
	for _, r := range ifname {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
	}
	if !ok {
		return fmt.Errorf("%s: %q is not an interface name (1 to 15 of A-Z, a-z, 0-9, _, ., -)", field, shown(ifname))
	}
	return nil
}

// shown is a value a pod wrote, fit for a message: printable, and cut, since it may be most of
// the 256 KiB a binding may hold.
func shown(v string) string {
	const keep = 64
	if len(v) > keep {
		v = v[:keep] + "..."
	}
	return Printable(v)
}

// IsDNSLabel is Kubernetes' DNS-1123 label rule (a namespace's or a DataNetwork's name): 1 to 63
// of a-z 0-9 -, alphanumeric at both ends.
func IsDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
