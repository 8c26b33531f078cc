package v1alpha1

import (
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddressClaimSpec is one address of a data network that a StackInstance's pod serves.
type AddressClaimSpec struct {
	// Network is the DataNetwork the address is on. Claims of a network live in the operator's
	// namespace, named after the network and the address (NetworkAddressClaimName), so one
	// address of a network has one holder in the whole cluster. Empty on a claim an operator
	// before DataNetworks made (in the stack's namespace): the operator moves those.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Network string `json:"network,omitempty"`

	// PodNamespace is the namespace of the stack and its pod.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	PodNamespace string `json:"podNamespace,omitempty"`

	// PodUID is the UID of the pod that holds the address, set by the operator once the pod
	// exists: the claim is that pod's and no other's, and is released when it goes.
	// +kubebuilder:validation:MaxLength=36
	// +optional
	PodUID string `json:"podUID,omitempty"`

	// StackInstance is the stack whose pod serves the address.
	// +kubebuilder:validation:MaxLength=63
	StackInstance string `json:"stackInstance"`

	// Address is the claimed address, without its prefix length.
	// +kubebuilder:validation:MaxLength=39
	Address string `json:"address"`

	// Port is the spec.ports entry of the stack that serves the address.
	// +kubebuilder:validation:MaxLength=32
	Port string `json:"port"`

	// Pod is the pod the admission webhook claimed the address for, as it was named then
	// (its generateName with a trailing "*" when the name was not chosen yet).
	// +kubebuilder:validation:MaxLength=254
	// +optional
	Pod string `json:"pod,omitempty"`
}

// AddressClaim records that one pod of a StackInstance serves an address, so that no other pod
// is given it. Its name is the stack's name and the address (AddressClaimName), so creating it
// is the atomic test-and-set of the address: the API server lets one creation of a name
// succeed. The admission webhook creates it for every static or pool address of a pod it
// injects; the operator then makes the pod its owner, so the garbage collector deletes it with
// the pod, and deletes a claim no pod came to hold (a pod whose creation failed after admission).
// Users never write one.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fstack
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.spec.network`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.podNamespace`
// +kubebuilder:printcolumn:name="Stack",type=string,JSONPath=`.spec.stackInstance`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.pod`
// +kubebuilder:printcolumn:name="Bound",type=string,JSONPath=`.spec.podUID`,priority=1,description="the UID of the pod that holds the address; empty while the pod is being created"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AddressClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AddressClaimSpec `json:"spec"`
}

// AddressClaimList is a list of AddressClaims.
// +kubebuilder:object:root=true
type AddressClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AddressClaim `json:"items"`
}

// AddressClaimName is the name of the claim of addr (without prefix) by stack: the stack's name,
// a dot, and the address spelt with dashes, every IPv6 group in full so that two addresses never
// share a name (10-56-0-10, 2001-0db8-0000-0000-0000-0000-0000-0011). The stack's name is a
// label value (at most 63 characters), so the name stays well within 253.
func AddressClaimName(stack string, addr netip.Addr) string {
	return stack + "." + addressNamePart(addr)
}

// NetworkAddressClaimName is the name of the claim of addr (without prefix) on a data network:
// the network's name, a dot, and the address as AddressClaimName spells it. A network's name is
// a DNS-1123 label, so the name stays well within 253.
func NetworkAddressClaimName(network string, addr netip.Addr) string {
	return network + "." + addressNamePart(addr)
}

func addressNamePart(addr netip.Addr) string {
	addr = addr.Unmap()
	if addr.Is4() {
		return strings.ReplaceAll(addr.String(), ".", "-")
	}
	b := addr.As16()
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = fmt.Sprintf("%02x%02x", b[2*i], b[2*i+1])
	}
	return strings.Join(groups, "-")
}
