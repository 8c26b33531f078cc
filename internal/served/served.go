// Package served tells which addresses a bound pod's F-Stack serves, for the readers that
// publish or show them (the operator's EndpointSlices, kubectl fstack status): the pod's
// kubefstack.io/addresses annotation, or the static addresses of its spec snapshot.
package served

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// StackPortAnnotation, on a Service that opts in with StackServiceAnnotation, names the stack
// port (spec.ports[].name, or its index) whose served addresses the Service's endpoints carry.
// Without it, port 0: a stack's first port is its service network in every sample, and a
// Service per data network is how a multi-port stack is reached (one address per endpoint,
// as kube-proxy and DNS expect).
const StackPortAnnotation = "kubefstack.io/stack-port"

// maxSpecSnapshot bounds the spec snapshot a reader decodes: the injector writes a few KiB, and
// the pod's annotations are the pod's to write.
const maxSpecSnapshot = 256 * 1024

// errNotServed says why a pod has no address to publish (not a malformed pod: the user's fix).
type errNotServed struct{ msg string }

func (e *errNotServed) Error() string { return e.msg }

// Addresses are the addresses a bound pod's F-Stack serves on the stack port named by
// port ("" is port 0): from podcontract.AddressesAnnotation when the pod has it, else the static
// addresses of the pod's spec snapshot (pods injected before the annotation was written). A pod
// whose address comes from its attachment and lacks the annotation serves an address nobody
// here knows: an error says so.
func Addresses(pod *corev1.Pod, port string) ([]netip.Addr, error) {
	spec, err := podSpecSnapshot(pod)
	if err != nil {
		return nil, err
	}
	idx, err := stackPortIndex(spec, port)
	if err != nil {
		return nil, err
	}
	if v, ok := pod.Annotations[podcontract.AddressesAnnotation]; ok {
		all, err := podcontract.ParseAddresses(v)
		if err != nil {
			return nil, err
		}
		var out []netip.Addr
		for _, a := range all {
			if a.Port == idx {
				out = append(out, a.Addr)
			}
		}
		if len(out) == 0 {
			return nil, &errNotServed{fmt.Sprintf("its annotation %s names no address of stack port %d", podcontract.AddressesAnnotation, idx)}
		}
		return out, nil
	}
	return staticAddresses(spec, idx)
}

// podSpecSnapshot decodes the pod's spec snapshot (hostile input: bounded, strict JSON).
func podSpecSnapshot(pod *corev1.Pod) (*fsv1.StackInstanceSpec, error) {
	raw, ok := pod.Annotations[podcontract.SpecAnnotation]
	if !ok {
		return nil, &errNotServed{fmt.Sprintf("it has no %s annotation: it was not injected", podcontract.SpecAnnotation)}
	}
	if len(raw) > maxSpecSnapshot {
		return nil, fmt.Errorf("annotation %s: %d bytes, at most %d", podcontract.SpecAnnotation, len(raw), maxSpecSnapshot)
	}
	if v := pod.Annotations[podcontract.SpecVersionAnnotation]; v != "" && v != fsv1.GroupVersion.String() {
		return nil, fmt.Errorf("annotation %s: version %q, this operator reads %s", podcontract.SpecVersionAnnotation, podcontract.Printable(v), fsv1.GroupVersion)
	}
	spec := &fsv1.StackInstanceSpec{}
	if err := json.Unmarshal([]byte(raw), spec); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", podcontract.SpecAnnotation, err)
	}
	return spec, nil
}

// stackPortIndex resolves a StackPortAnnotation value against the pod's own spec.
func stackPortIndex(spec *fsv1.StackInstanceSpec, port string) (int, error) {
	if port == "" {
		if len(spec.Ports) == 0 {
			return 0, &errNotServed{"its stack has no port"}
		}
		return 0, nil
	}
	for i := range spec.Ports {
		if spec.Ports[i].Name == port {
			return i, nil
		}
	}
	if n, err := strconv.Atoi(port); err == nil && strconv.Itoa(n) == port && n >= 0 && n < len(spec.Ports) {
		return n, nil
	}
	return 0, &errNotServed{fmt.Sprintf("its stack has no port named %q (annotation %s: a name from the StackInstance's spec.ports, or an index)",
		podcontract.Printable(port), StackPortAnnotation)}
}

// staticAddresses are the port's static addresses, without their prefix.
func staticAddresses(spec *fsv1.StackInstanceSpec, idx int) ([]netip.Addr, error) {
	a := spec.Ports[idx].Addressing
	var out []netip.Addr
	if a.IPv4 != nil {
		if a.IPv4.From == fsv1.AddressAttachment {
			return nil, &errNotServed{fmt.Sprintf("stack port %d takes its address from the attachment and the pod has no %s annotation (it was injected before the operator wrote it): recreate the pod",
				idx, podcontract.AddressesAnnotation)}
		}
		p, err := netip.ParsePrefix(a.IPv4.Address)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: port %d: ipv4 address %q: %w", podcontract.SpecAnnotation, idx, podcontract.Printable(a.IPv4.Address), err)
		}
		out = append(out, p.Addr())
	}
	if a.IPv6 != nil && a.IPv6.From != fsv1.AddressAttachment {
		p, err := netip.ParsePrefix(a.IPv6.Address)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: port %d: ipv6 address %q: %w", podcontract.SpecAnnotation, idx, podcontract.Printable(a.IPv6.Address), err)
		}
		out = append(out, p.Addr())
	}
	if len(out) == 0 {
		return nil, &errNotServed{fmt.Sprintf("stack port %d has no static address and the pod has no %s annotation", idx, podcontract.AddressesAnnotation)}
	}
	return out, nil
}

// All are the addresses the pod's F-Stack serves on every stack port, as Addresses reads them:
// the annotation's entries, or each port's static addresses (a port whose address comes from
// the attachment is left out then, and named in the error, which comes with what was found).
func All(pod *corev1.Pod) ([]podcontract.ServedAddress, error) {
	if v, ok := pod.Annotations[podcontract.AddressesAnnotation]; ok {
		return podcontract.ParseAddresses(v)
	}
	spec, err := podSpecSnapshot(pod)
	if err != nil {
		return nil, err
	}
	var out []podcontract.ServedAddress
	var errs []string
	for i := range spec.Ports {
		addrs, err := staticAddresses(spec, i)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for _, a := range addrs {
			out = append(out, podcontract.ServedAddress{Port: i, Addr: a})
		}
	}
	if len(errs) > 0 {
		return out, errors.New(strings.Join(errs, "; "))
	}
	return out, nil
}

// VIPs are the stack's shared addresses: every port's and VLAN's vips and vips6.
func VIPs(spec *fsv1.StackInstanceSpec) []string {
	var out []string
	for i := range spec.Ports {
		out = append(out, spec.Ports[i].VIPs...)
		out = append(out, spec.Ports[i].VIPs6...)
	}
	for i := range spec.VLANs {
		out = append(out, spec.VLANs[i].VIPs...)
		out = append(out, spec.VLANs[i].VIPs6...)
	}
	return out
}
