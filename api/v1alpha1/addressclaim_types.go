package v1alpha1

import (
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddressClaimSpec is one address a StackInstance's pod serves.
type AddressClaimSpec struct {
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
// +kubebuilder:printcolumn:name="Stack",type=string,JSONPath=`.spec.stackInstance`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.metadata.ownerReferences[0].name`,description="the pod that holds the address; empty while the pod is being created"
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
	addr = addr.Unmap()
	if addr.Is4() {
		return stack + "." + strings.ReplaceAll(addr.String(), ".", "-")
	}
	b := addr.As16()
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = fmt.Sprintf("%02x%02x", b[2*i], b[2*i+1])
	}
	return stack + "." + strings.Join(groups, "-")
}
