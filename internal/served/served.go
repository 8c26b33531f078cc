// Package served tells which addresses a bound pod's F-Stack serves, for the readers that
// publish or show them (the operator's EndpointSlices, kubectl fstack status): the pod's
// podcontract.AddressesAnnotation, the one carrier of them.
package served

import (
	"fmt"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// errNotServed says why a pod has no address to publish (not a malformed pod: the user's fix).
type errNotServed struct{ msg string }

func (e *errNotServed) Error() string { return e.msg }

// Addresses are the addresses a bound pod's F-Stack serves on the stack port named by port (a
// podcontract.ServiceStackPortAnnotation value: "" is port 0; else a port's name or its index), from podcontract.AddressesAnnotation. A pod
// without it was not injected, or was injected by an operator built before it was written: an error says
// to re-create it (docs/upgrading.md).
func Addresses(pod *corev1.Pod, port string) ([]netip.Addr, error) {
	all, err := All(pod)
	if err != nil {
		return nil, err
	}
	match := stackPort(port)
	var out []netip.Addr
	for _, a := range all {
		if match(a) {
			out = append(out, a.Addr)
		}
	}
	if len(out) == 0 {
		return nil, &errNotServed{fmt.Sprintf("its annotation %s names no address of stack port %s", podcontract.AddressesAnnotation, describePort(port))}
	}
	return out, nil
}

// All are the addresses the pod's F-Stack serves on every stack port.
func All(pod *corev1.Pod) ([]podcontract.ServedAddress, error) {
	v, ok := pod.Annotations[podcontract.AddressesAnnotation]
	if !ok {
		return nil, &errNotServed{fmt.Sprintf("it has no %s annotation: it was not injected, or injected by an operator built before it was written "+
			"(re-create it), or its addresses come from the attachment's IPAM, which the operator does not learn",
			podcontract.AddressesAnnotation)}
	}
	return podcontract.ParseAddresses(v)
}

// stackPort matches the entries of a ServiceStackPortAnnotation value: port 0 for "", a port of that
// index for a number, else the port of that name. An entry of an operator built before entries named their port has no
// name and matches only by index.
func stackPort(port string) func(podcontract.ServedAddress) bool {
	if port == "" {
		return func(a podcontract.ServedAddress) bool { return a.Port == 0 }
	}
	if n, err := strconv.Atoi(port); err == nil && strconv.Itoa(n) == port {
		return func(a podcontract.ServedAddress) bool { return a.Port == n }
	}
	return func(a podcontract.ServedAddress) bool { return a.PortName == port }
}

func describePort(port string) string {
	if port == "" {
		return "0"
	}
	return strconv.Quote(podcontract.Printable(podcontract.Clip(port, 64)))
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
