package v1alpha1

// PortSpec is one DPDK port F-Stack drives ([portN]); its DPDK port id is assigned at start-up
// from the devices the pod really got.
// +kubebuilder:validation:XValidation:rule="!has(self.vipInterface) || has(self.vips) || has(self.vips6)",fieldPath=".vipInterface",message="vipInterface needs vips or vips6"
type PortSpec struct {
	// Name identifies the port within the stack.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=32
	Name string `json:"name"`

	// Attachment is the pod's network attachment (the CNI interface name, such as net1) whose
	// device information and addresses this port uses. Defaults to the port name (the renderer
	// sets it: a schema default cannot name another field).
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	// +kubebuilder:validation:MaxLength=15
	// +optional
	Attachment string `json:"attachment,omitempty"`

	// Network is the Multus NetworkAttachmentDefinition that gives the pod this port's
	// attachment. The injector then adds it to the pod's k8s.v1.cni.cncf.io/networks annotation
	// with interface: <attachment>, and with the port's static addresses (ips) and vhostUser.mac
	// (mac), so the network's CNI plugin uses them instead of leasing an address or choosing a MAC.
	// Without it the pod gets the attachment another way (a node's chained conflist, or an
	// annotation the pod carries).
	// +optional
	Network *NetworkRef `json:"network,omitempty"`

	// DataNetwork is the DataNetwork (cluster-scoped, the platform's) the port is on: its
	// addresses, VIPs, VLANs and MAC must be what the network grants the stack's namespace.
	// Default: the operator's --default-data-network (the chart's dataNetwork.name).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	DataNetwork string `json:"dataNetwork,omitempty"`

	// Device is what backs the port: exactly one of vhostUser, pci or bond.
	Device PortDevice `json:"device"`

	// IfName is F-Stack's interface name (if_name); default f-stack-<port id>.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	// +kubebuilder:validation:MaxLength=15
	// +optional
	IfName string `json:"ifName,omitempty"`

	// Processes are the indices of the F-Stack processes that serve this port (lcore_list), one
	// RX/TX queue each. Default: every process.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Minimum=0
	// +optional
	Processes []int32 `json:"processes,omitempty"`

	// VIPInterface is the interface VIPs are attached to (vip_ifname), e.g. lo0. Default: the port.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	// +kubebuilder:validation:MaxLength=15
	// +optional
	VIPInterface string `json:"vipInterface,omitempty"`

	Addressing `json:",inline"`
}

// NetworkRef names a NetworkAttachmentDefinition (k8s.cni.cncf.io/v1). Both names are DNS-1123
// labels, as Multus requires of the networks annotation's entries.
type NetworkRef struct {
	// Name of the NetworkAttachmentDefinition.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Namespace of the NetworkAttachmentDefinition; default: the pod's.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Addressing is the layer-3 configuration of a port or a VLAN sub-interface.
type Addressing struct {
	// IPv4 is the interface address (addr, netmask, broadcast, gateway). F-Stack requires one on
	// every port; a port with VLANs may omit it (the first VLAN's address fills the unused keys).
	// +optional
	IPv4 *IPv4Address `json:"ipv4,omitempty"`

	// IPv6 is the interface's IPv6 address (addr6, prefix_len, gateway6).
	// +optional
	IPv6 *IPv6Address `json:"ipv6,omitempty"`

	// VIPs are extra IPv4 addresses, each added as a /32 (vip_addr, at most 64).
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=15
	// +optional
	VIPs []string `json:"vips,omitempty"`

	// VIPs6 are extra IPv6 addresses (vip_addr6, at most 64).
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=39
	// +optional
	VIPs6 []string `json:"vips6,omitempty"`

	// VIPPrefixLength is the prefix length of every IPv6 VIP (vip_prefix_len); default 64.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	// +optional
	VIPPrefixLength int32 `json:"vipPrefixLength,omitempty"`

	// PolicyRoutes are source CIDRs whose outgoing traffic uses this interface's routing table
	// (ipfw_pr). They take effect only if the dataplane's F-Stack was built with FF_IPFW.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=18
	// +optional
	PolicyRoutes []string `json:"policyRoutes,omitempty"`
}

// AddressSource says where an address comes from.
// +kubebuilder:validation:Enum=Static;Attachment;Pool
type AddressSource string

const (
	// AddressStatic takes the address from the spec.
	AddressStatic AddressSource = "Static"
	// AddressAttachment takes the address the network attachment's IPAM gave the pod, read by the
	// dataplane at start-up.
	AddressAttachment AddressSource = "Attachment"
	// AddressPool gives every pod of the stack its own address from pool, claimed at admission
	// and released when the pod goes.
	AddressPool AddressSource = "Pool"
)

// IPPool is the addresses a stack's pods take one each (from: Pool): the admission webhook
// claims the lowest free one for every pod it injects (an AddressClaim), and the pod's claim goes
// with the pod.
type IPPool struct {
	// Ranges are the pool's addresses, each entry one address (10.56.0.10) or an inclusive range
	// (10.56.0.10-10.56.0.50), all of the family of the field that holds the pool and all in
	// the subnet of prefixLength. At most 65536 addresses in all.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=79
	Ranges []string `json:"ranges"`

	// PrefixLength is the length of the subnet's prefix (the netmask): 1 to 32 for IPv4, 1 to
	// 128 for IPv6.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	PrefixLength int32 `json:"prefixLength"`
}

// IPv4Address is an interface's IPv4 configuration.
// +kubebuilder:validation:XValidation:rule="self.from != 'Static' || has(self.address)",fieldPath=".address",reason=FieldValueRequired,message="address is required when from is Static"
// +kubebuilder:validation:XValidation:rule="self.from == 'Attachment' || has(self.gateway)",fieldPath=".gateway",reason=FieldValueRequired,message="gateway is required when from is Static or Pool: F-Stack refuses a port without one"
// +kubebuilder:validation:XValidation:rule="(self.from == 'Pool') == has(self.pool)",fieldPath=".pool",message="pool is required when from is Pool, and only then"
// +kubebuilder:validation:XValidation:rule="self.from != 'Pool' || !has(self.address)",fieldPath=".address",reason=FieldValueForbidden,message="address is for from: Static; a pool gives each pod its own address"
// +kubebuilder:validation:XValidation:rule="!has(self.pool) || self.pool.prefixLength <= 32",fieldPath=".pool.prefixLength",message="pool.prefixLength of an IPv4 pool is 1 to 32"
type IPv4Address struct {
	// From says whether the address is given here (Static), taken from the attachment's IPAM
	// result (Attachment), or taken by each pod from pool (Pool).
	// +kubebuilder:default=Static
	// +optional
	From AddressSource `json:"from,omitempty"`

	// Address in CIDR notation, e.g. 10.0.0.10/24 (addr and netmask). It serves one pod: a
	// second pod of the stack is refused while the first holds it (use a pool for replicas).
	// +kubebuilder:validation:MaxLength=18
	// +optional
	Address string `json:"address,omitempty"`

	// Pool is where each pod takes its own address from (from: Pool).
	// +optional
	Pool *IPPool `json:"pool,omitempty"`

	// Gateway is the default route of this interface's routing table (gateway).
	// +kubebuilder:validation:MaxLength=15
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// Broadcast address; default: derived from the address.
	// +kubebuilder:validation:MaxLength=15
	// +optional
	Broadcast string `json:"broadcast,omitempty"`
}

// IPv6Address is an interface's IPv6 configuration.
// +kubebuilder:validation:XValidation:rule="self.from != 'Static' || has(self.address)",fieldPath=".address",reason=FieldValueRequired,message="address is required when from is Static"
// +kubebuilder:validation:XValidation:rule="(self.from == 'Pool') == has(self.pool)",fieldPath=".pool",message="pool is required when from is Pool, and only then"
// +kubebuilder:validation:XValidation:rule="self.from != 'Pool' || !has(self.address)",fieldPath=".address",reason=FieldValueForbidden,message="address is for from: Static; a pool gives each pod its own address"
type IPv6Address struct {
	// From says whether the address is given here (Static), taken from the attachment's IPAM
	// result (Attachment), or taken by each pod from pool (Pool).
	// +kubebuilder:default=Static
	// +optional
	From AddressSource `json:"from,omitempty"`

	// Address in CIDR notation, e.g. 2001:db8::10/64 (addr6 and prefix_len). It serves one pod,
	// like ipv4.address.
	// +kubebuilder:validation:MaxLength=43
	// +optional
	Address string `json:"address,omitempty"`

	// Pool is where each pod takes its own address from (from: Pool).
	// +optional
	Pool *IPPool `json:"pool,omitempty"`

	// Gateway is the IPv6 default route (gateway6); F-Stack installs it in the default table only.
	// +kubebuilder:validation:MaxLength=39
	// +optional
	Gateway string `json:"gateway,omitempty"`
}

// PortDevice is what backs a port. Exactly one member is set.
// +kubebuilder:validation:XValidation:rule="(has(self.vhostUser) ? 1 : 0) + (has(self.pci) ? 1 : 0) + (has(self.bond) ? 1 : 0) == 1",message="set exactly one of vhostUser, pci or bond"
type PortDevice struct {
	// VhostUser is a virtio_user port over the vhost-user socket the CNI plugin made ([vdevN]).
	// +optional
	VhostUser *VhostUserDevice `json:"vhostUser,omitempty"`

	// PCI is a physical NIC or SR-IOV VF bound to a DPDK driver (allow).
	// +optional
	PCI *PCIDevice `json:"pci,omitempty"`

	// Bond is a DPDK bonding port over PCI members ([bondN]). Single process only, and broken with
	// F-Stack v1.25 (it emits the slave= key that DPDK 23.11 rejects).
	// +optional
	Bond *BondDevice `json:"bond,omitempty"`
}

// VhostUserDevice is a virtio_user port; the socket path comes from the attachment at start-up.
type VhostUserDevice struct {
	// Queues is the number of queue pairs (queues); default: the number of processes serving the
	// port, and never fewer.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=255
	// +optional
	Queues int32 `json:"queues,omitempty"`

	// QueueSize is the ring size (queue_size), a power of two; DPDK's default is 256.
	// +kubebuilder:validation:Minimum=64
	// +kubebuilder:validation:Maximum=32768
	// +optional
	QueueSize int32 `json:"queueSize,omitempty"`

	// MAC is the port's MAC address; default: the attachment's MAC.
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$`
	// +kubebuilder:validation:MaxLength=17
	// +kubebuilder:validation:XValidation:rule="!self.matches('^.[13579bBdDfF]')",message="a multicast MAC (the first octet odd) cannot be a port's address: bridges and switches drop frames sent from it; use a unicast MAC, e.g. 02:00:00:00:00:01"
	// +optional
	MAC string `json:"mac,omitempty"`

	// ControlQueue enables the virtio control queue (cq=1). DPDK turns it on anyway when queues > 1.
	// +optional
	ControlQueue bool `json:"controlQueue,omitempty"`
}

// PCIDevice is a PCI function, named literally or through an SR-IOV device-plugin resource.
// +kubebuilder:validation:XValidation:rule="has(self.address) != has(self.resource)",message="set exactly one of address or resource"
type PCIDevice struct {
	// Address is a literal PCI address (domain:bus:device.function), e.g. 0000:3b:02.0.
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`
	// +optional
	Address string `json:"address,omitempty"`

	// Resource is an SR-IOV device-plugin resource (e.g. intel.com/sriov_dpdk). The pod requests
	// it and the device plugin passes the allocated addresses in PCIDEVICE_<RESOURCE>; ports that
	// share a resource take its addresses in port order.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.-]+/[A-Za-z0-9_.-]+$`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Resource string `json:"resource,omitempty"`
}

// BondMode is a DPDK bonding mode (0 round-robin … 6 adaptive load balancing).
// +kubebuilder:validation:Minimum=0
// +kubebuilder:validation:Maximum=6
type BondMode int32

// BondDevice is a DPDK bonding port. F-Stack's lsc_poll_period_ms, up_delay and down_delay are
// deliberately absent: the bonding driver rejects them in every DPDK version.
type BondDevice struct {
	// Mode is the bonding mode (mode).
	Mode BondMode `json:"mode"`

	// Members are the PCI functions bonded together (slave).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Members []PCIDevice `json:"members"`

	// PrimaryMember is the index in members of the primary member (primary).
	// +kubebuilder:validation:Minimum=0
	// +optional
	PrimaryMember *int32 `json:"primaryMember,omitempty"`

	// MAC of the bond (mac).
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$`
	// +kubebuilder:validation:MaxLength=17
	// +kubebuilder:validation:XValidation:rule="!self.matches('^.[13579bBdDfF]')",message="a multicast MAC (the first octet odd) cannot be a port's address: bridges and switches drop frames sent from it; use a unicast MAC, e.g. 02:00:00:00:00:01"
	// +optional
	MAC string `json:"mac,omitempty"`

	// XmitPolicy is the balance transmit policy (xmit_policy).
	// +kubebuilder:validation:Enum=l2;l23;l34
	// +optional
	XmitPolicy string `json:"xmitPolicy,omitempty"`

	// SocketID is the NUMA socket of the bond (socket_id).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +optional
	SocketID int32 `json:"socketID,omitempty"`
}

// VLANSpec is an 802.1Q sub-interface <port interface>.<id> ([vlan<id>]).
type VLANSpec struct {
	// ID is the VLAN id.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	ID int32 `json:"id"`

	// Port is the name of the parent port.
	// +kubebuilder:validation:MaxLength=32
	Port string `json:"port"`

	Addressing `json:",inline"`
}
