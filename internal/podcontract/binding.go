package podcontract

// PortBinding is what fstack-cni binds a vhost-user port's anti-spoofing rules to beyond the
// addresses its result reports: the stack's VIPs and VLAN addresses (Sources) and the VLANs the
// port sends tagged frames on. The injector writes it from the StackInstance; a pod may write
// its own, so fstack-cni holds whatever it reads to the network's subnet and gateways and to
// the addresses other ports of the node hold.
type PortBinding struct {
	// IPs are the port's own addresses with their prefix length (10.99.0.10/24). Only the
	// BindingAnnotation carries them: on the Multus path they are the networks entry's ips.
	IPs []string `json:"ips,omitempty"`
	// Sources are the further addresses the stack sends from (VIPs, VLAN addresses and their
	// VIPs), without a prefix length.
	Sources []string `json:"sources,omitempty"`
	// VLANs are the 802.1Q VLAN ids of the stack's VLAN sub-interfaces on the port.
	VLANs []int `json:"vlans,omitempty"`
}

// CNIArgsBinding is the key of a PortBinding in a Multus networks entry's cni-args, which Multus
// hands to the network's plugin as args.cni of its config.
const CNIArgsBinding = "kubefstack.io/binding"

// BindingAnnotation is the pod annotation with a PortBinding per attachment (interface name),
// JSON: {"eth0": {"ips": [...], "sources": [...], "vlans": [...]}}. It reaches a chained
// fstack-cni (no Multus) through the runtime's pod-annotations capability (PodAnnotationsCapability).
const BindingAnnotation = "kubefstack.io/binding"

// PodAnnotationsCapability is the CNI capability under which containerd and CRI-O pass a pod's
// annotations in runtimeConfig to a plugin that declares it.
const PodAnnotationsCapability = "io.kubernetes.cri.pod-annotations"
