package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-fstack/kube-fstack/internal/netplan"
)

// DataNetworkSpec is one data network as the platform runs it: its subnets and routers, the VLANs
// it carries, how its ports' MACs are made, the nodes it reaches, and which namespaces may take
// which of its addresses. A StackInstance's port names the network it is on (spec.ports[].
// dataNetwork) and may hold only what the network grants its namespace: the admission webhook
// refuses any other address, VIP, VLAN or MAC, and fstack-cni refuses it again at ADD from the
// copy the node was given (cni.nodeConfig), whatever the pod says.
// +kubebuilder:validation:XValidation:rule="!has(self.mac) || self.mac.policy != 'Prefix' || has(self.mac.prefix)",fieldPath=".mac.prefix",reason=FieldValueRequired,message="mac.prefix is required with policy Prefix, e.g. 02:5a:00"
type DataNetworkSpec struct {
	// Subnets are the network's subnets, IPv4 and IPv6 CIDRs (10.56.0.0/24, fd00:56::/64). Every
	// address a port takes on the network is in one of them, with that subnet's prefix length.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="a subnet is a CIDR, e.g. 10.56.0.0/24 or fd00:56::/64"
	Subnets []string `json:"subnets"`

	// Gateways are the network's routers, never a pod's address. A port's gateway must be one of
	// them (when the network lists any).
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=39
	// +kubebuilder:validation:items:XValidation:rule="isIP(self)",message="a gateway is an IP address, e.g. 10.56.0.1"
	// +optional
	Gateways []string `json:"gateways,omitempty"`

	// Reserved are addresses no port may take or send from (the routers' other addresses, a
	// DHCP range, the nodes' addresses on the network): each an address, a CIDR or first-last.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=79
	// +optional
	Reserved []string `json:"reserved,omitempty"`

	// VLANs are the 802.1Q VLAN ids the network carries: a stack's VLAN sub-interface on a port
	// of this network must use one of them. Empty: untagged frames only.
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=4094
	// +optional
	VLANs []int32 `json:"vlans,omitempty"`

	// MAC says how a port's MAC address is made.
	// +optional
	MAC *MACPolicy `json:"mac,omitempty"`

	// NodeSelector are the labels of the nodes that carry the network: the injector requires
	// them in the node affinity of every pod with a port on it. Empty: every node.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Grants say which namespaces may take which addresses of the network. A namespace no grant
	// names can put no port on it.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Grants []AddressGrant `json:"grants,omitempty"`
}

// MACPolicySource is how a data network's port MACs are made.
// +kubebuilder:validation:Enum=Derived;Prefix
type MACPolicySource string

const (
	// MACDerived: fstack-cni derives each port's MAC; a StackInstance may not set one.
	MACDerived MACPolicySource = "Derived"
	// MACPrefix: a StackInstance may set a port's MAC within prefix (else fstack-cni derives one).
	MACPrefix MACPolicySource = "Prefix"
)

// MACPolicy is how a data network's port MACs are made.
type MACPolicy struct {
	// Policy is Derived (default: the plugin derives every MAC, a stack sets none) or Prefix.
	// +kubebuilder:default=Derived
	// +optional
	Policy MACPolicySource `json:"policy,omitempty"`

	// Prefix is the first one to five octets every MAC a stack sets must begin with, locally
	// administered and unicast (the first octet's low two bits 10), e.g. 02:5a:00.
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F][26aAeE](:[0-9a-fA-F]{2}){0,4}$`
	// +kubebuilder:validation:MaxLength=14
	// +optional
	Prefix string `json:"prefix,omitempty"`
}

// AddressGrant gives the namespaces it selects the addresses of ranges: static addresses, pools,
// VIPs and VLAN addresses of their stacks' ports on the network must be in them.
// +kubebuilder:validation:XValidation:rule="has(self.namespaces) || has(self.namespaceSelector)",message="a grant names namespaces, a namespaceSelector, or both"
type AddressGrant struct {
	// Namespaces are the namespaces granted, by name.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector grants the namespaces whose labels it matches. fstack-cni cannot read
	// namespace labels: on the node, such a grant holds a port to its ranges but not to a
	// namespace (the admission webhook checked that).
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Ranges are the granted addresses: each an address, a CIDR or first-last, IPv4 or IPv6.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=79
	Ranges []string `json:"ranges"`
}

// DataNetwork is a data network the platform runs, cluster-scoped and written only by the
// platform's administrators (tenants get read access at most): its subnets, routers, VLANs, MAC
// policy, nodes, and the addresses each namespace may take. The chart renders one from its
// dataNetwork values; StackInstance ports name it (spec.ports[].dataNetwork, default the
// operator's --default-data-network).
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=fstack,shortName=dnet
// +kubebuilder:printcolumn:name="Subnets",type=string,JSONPath=`.spec.subnets`
// +kubebuilder:printcolumn:name="Gateways",type=string,JSONPath=`.spec.gateways`
// +kubebuilder:printcolumn:name="VLANs",type=string,JSONPath=`.spec.vlans`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DataNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec DataNetworkSpec `json:"spec"`
}

// DataNetworkList is a list of DataNetworks.
// +kubebuilder:object:root=true
type DataNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DataNetwork `json:"items"`
}

// Plan is the network in the form its enforcers read (the admission webhook, and fstack-cni from
// the node config's copy).
func (d *DataNetwork) Plan() netplan.Spec {
	s := netplan.Spec{Name: d.Name, Subnets: d.Spec.Subnets, Gateways: d.Spec.Gateways, Reserved: d.Spec.Reserved}
	for _, v := range d.Spec.VLANs {
		s.VLANs = append(s.VLANs, int(v))
	}
	if d.Spec.MAC != nil && d.Spec.MAC.Policy == MACPrefix {
		s.MACPrefix = d.Spec.MAC.Prefix
	}
	for _, g := range d.Spec.Grants {
		s.Grants = append(s.Grants, netplan.Grant{Namespaces: g.Namespaces, BySelector: g.NamespaceSelector != nil, Ranges: g.Ranges})
	}
	return s
}
