package podcontract

// The external_ids keys fstack-cni keeps on each OVS port it makes (Interface and Port rows):
// CHECK, DEL, GC and the flow keeper find everything they need there, so the port is the
// plugin's only state, and after ovs-vswitchd restarts the keeper puts the anti-spoofing rules
// back from OVSDB alone, which no pod can write.
const (
	// OVSIDOwner marks a port as fstack-cni's (OVSOwner).
	OVSIDOwner = "kube-fstack.io/owner"
	OVSOwner   = "fstack-cni"
	// OVSIDNetwork, OVSIDContainerID and OVSIDIfName identify the attachment (CNI's network
	// name, container ID and interface).
	OVSIDNetwork     = "kube-fstack.io/network"
	OVSIDContainerID = "kube-fstack.io/container-id"
	OVSIDIfName      = "kube-fstack.io/ifname"
	// OVSIDPodNamespace, OVSIDPodName and OVSIDPodUID name the pod, for GC and the keeper's logs.
	OVSIDPodNamespace = "kube-fstack.io/pod-namespace"
	OVSIDPodName      = "kube-fstack.io/pod-name"
	OVSIDPodUID       = "kube-fstack.io/pod-uid"
	// OVSIDMAC is the MAC the port's rules pass. Ports made by an fstack-cni before it have
	// none, and the keeper cannot restore their rules (it says so).
	OVSIDMAC = "kube-fstack.io/mac"
	// OVSIDAddrs and OVSIDVLANs are the addresses and VLAN ids the port's rules bind. A port
	// without OVSIDAddrs was made by an fstack-cni that bound the MAC alone.
	OVSIDAddrs = "kube-fstack.io/ips"
	OVSIDVLANs = "kube-fstack.io/vlans"
	// OVSIDHoldsPrefix, followed by an address, is set on the port that holds that address on
	// the node: the transaction that makes a port fails when another port holds one of its
	// addresses (an OVSDB index-like check without a schema change).
	OVSIDHoldsPrefix = "kube-fstack.io/holds/"
)
