package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StackInstanceSpec is the F-Stack stack that every pod bound to this StackInstance runs: one
// F-Stack process per exclusive CPU of the pod's dataplane container.
//
// Values only the pod knows at start-up (its exclusive CPUs and so the lcore mask, the PCI
// address of an SR-IOV VF, the vhost-user socket, an address from IPAM) are not in the spec: the
// dataplane fills them in before F-Stack starts.
//
// The rules over spec.vlans, spec.rssCheck.entries and spec.ports name the entry at fault in
// their messageExpression: a fieldPath cannot hold a list index. The index is spelt with a digit
// table, not string(int), and the value is read back through the index: the API server's cost
// estimate takes a string from string() or from a filtered list as unbounded and refuses the
// CRD (internal/crdschema's TestCRDPassesTheAPIServersValidation checks it). CEL's empty string
// is written \"\" here, never as two single quotes: gofmt turns those into a typographic quote
// in a doc comment, which compiles to a different CRD than make generate ran on.
// +kubebuilder:validation:XValidation:rule="!has(self.vlans) || self.vlans.all(v, self.ports.exists(p, p.name == v.port))",fieldPath=".vlans",message="every vlans[].port must name an entry of spec.ports",messageExpression="'spec.vlans[' + (self.vlans.indexOf(self.vlans.filter(v, !self.ports.exists(p, p.name == v.port))[0]) >= 100 ? ['0','1','2','3','4','5','6','7','8','9'][self.vlans.indexOf(self.vlans.filter(v, !self.ports.exists(p, p.name == v.port))[0]) / 100 % 10] : \"\") + (self.vlans.indexOf(self.vlans.filter(v, !self.ports.exists(p, p.name == v.port))[0]) >= 10 ? ['0','1','2','3','4','5','6','7','8','9'][self.vlans.indexOf(self.vlans.filter(v, !self.ports.exists(p, p.name == v.port))[0]) / 10 % 10] : \"\") + ['0','1','2','3','4','5','6','7','8','9'][self.vlans.indexOf(self.vlans.filter(v, !self.ports.exists(p, p.name == v.port))[0]) % 10] + '].port: ' + strings.quote(self.vlans[self.vlans.indexOf(self.vlans.filter(v, !self.ports.exists(p, p.name == v.port))[0])].port) + ' names no entry of spec.ports'"
// +kubebuilder:validation:XValidation:rule="!has(self.rssCheck) || !has(self.rssCheck.entries) || self.rssCheck.entries.all(e, self.ports.exists(p, p.name == e.port))",fieldPath=".rssCheck.entries",message="every rssCheck.entries[].port must name an entry of spec.ports",messageExpression="'spec.rssCheck.entries[' + (self.rssCheck.entries.indexOf(self.rssCheck.entries.filter(e, !self.ports.exists(p, p.name == e.port))[0]) >= 10 ? ['0','1','2','3','4','5','6','7','8','9'][self.rssCheck.entries.indexOf(self.rssCheck.entries.filter(e, !self.ports.exists(p, p.name == e.port))[0]) / 10 % 10] : \"\") + ['0','1','2','3','4','5','6','7','8','9'][self.rssCheck.entries.indexOf(self.rssCheck.entries.filter(e, !self.ports.exists(p, p.name == e.port))[0]) % 10] + '].port: ' + strings.quote(self.rssCheck.entries[self.rssCheck.entries.indexOf(self.rssCheck.entries.filter(e, !self.ports.exists(p, p.name == e.port))[0])].port) + ' names no entry of spec.ports'"
// +kubebuilder:validation:XValidation:rule="self.ports.all(p, !has(p.processes) || p.processes.all(i, i < self.processes))",fieldPath=".ports",message="ports[].processes may only name process indices below spec.processes",messageExpression="'spec.ports[' + (self.ports.indexOf(self.ports.filter(p, has(p.processes) && p.processes.exists(i, i >= self.processes))[0]) >= 10 ? ['0','1','2','3','4','5','6','7','8','9'][self.ports.indexOf(self.ports.filter(p, has(p.processes) && p.processes.exists(i, i >= self.processes))[0]) / 10 % 10] : \"\") + ['0','1','2','3','4','5','6','7','8','9'][self.ports.indexOf(self.ports.filter(p, has(p.processes) && p.processes.exists(i, i >= self.processes))[0]) % 10] + '].processes[' + (self.ports.filter(p, has(p.processes) && p.processes.exists(i, i >= self.processes))[0].processes.indexOf(self.ports.filter(p, has(p.processes) && p.processes.exists(i, i >= self.processes))[0].processes.filter(i, i >= self.processes)[0]) >= 10 ? ['0','1','2','3','4','5','6','7','8','9'][self.ports.filter(p, has(p.processes) && p.processes.exists(i, i >= self.processes))[0].processes.indexOf(self.ports.filter(p, has(p.processes) && p.processes.exists(i, i >= self.processes))[0].processes.filter(i, i >= self.processes)[0]) / 10 % 10] : \"\") + ['0','1','2','3','4','5','6','7','8','9'][self.ports.filter(p, has(p.processes) && p.processes.exists(i, i >= self.processes))[0].processes.indexOf(self.ports.filter(p, has(p.processes) && p.processes.exists(i, i >= self.processes))[0].processes.filter(i, i >= self.processes)[0]) % 10] + ']: no such process: spec.processes is ' + (self.processes >= 10 ? ['0','1','2','3','4','5','6','7','8','9'][self.processes / 10 % 10] : \"\") + ['0','1','2','3','4','5','6','7','8','9'][self.processes % 10] + ' (ports[].processes may only name process indices below it)'"
// +kubebuilder:validation:XValidation:rule="!has(self.program) || !has(self.shim) || ((!has(self.shim.enabled) || !self.shim.enabled) && !has(self.shim.kernelEvent) && !has(self.shim.multiSC) && (!has(self.shim.threadSocket) || !self.shim.threadSocket) && (!has(self.shim.polling) || !self.shim.polling) && (!has(self.shim.containers) || size(self.shim.containers) == 0))",fieldPath=".shim",message="a program linked with libfstack uses no shim: remove spec.shim (or leave only enabled: false)"
// +kubebuilder:validation:XValidation:rule="!has(self.program) || !has(self.dataplane) || !has(self.dataplane.image)",fieldPath=".dataplane.image",message="with spec.program the dataplane is the program's container and runs its image; remove spec.dataplane.image"
type StackInstanceSpec struct {
	// FStackVersion is the F-Stack release the dataplane runs; key names differ between versions.
	// +kubebuilder:default="v1.25"
	// +optional
	FStackVersion FStackVersion `json:"fstackVersion,omitempty"`

	// Processes is the number of F-Stack processes (= lcores = exclusive CPUs of the dataplane
	// container). Process 0 is the DPDK primary. The lcore mask is taken from the container's real
	// cpuset at start-up, never from the spec.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +kubebuilder:default=1
	// +optional
	Processes int32 `json:"processes,omitempty"`

	// DPDK holds the [dpdk] knobs of config.ini other than lcores and ports.
	// +optional
	DPDK DPDKSpec `json:"dpdk,omitempty"`

	// Ports are the DPDK ports F-Stack drives, each backed by a vhost-user attachment, a PCI device
	// or a bond.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Ports []PortSpec `json:"ports"`

	// VLANs put addresses and VIPs on 802.1Q sub-interfaces of a port ([vlanN] sections). A port with
	// VLANs gets its addresses only on those sub-interfaces.
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=128
	// +optional
	VLANs []VLANSpec `json:"vlans,omitempty"`

	// KNI is the exception path that hands selected traffic to the kernel ([kni]).
	// +optional
	KNI *KNISpec `json:"kni,omitempty"`

	// Profile sets tuning defaults taken from F-Stack's documents: LongConnections (keep-alive),
	// ShortConnections (a request per connection) or Proxy (connects out to upstreams). An
	// explicit field always wins; without a profile F-Stack's defaults apply. Values and sources:
	// docs/profiles.md §1; kubectl fstack render marks each value a profile set.
	// +optional
	Profile Profile `json:"profile,omitempty"`

	// FreeBSD tunes the user-space FreeBSD stack ([freebsd.boot] and [freebsd.sysctl]). F-Stack's
	// shipped defaults apply to every key not set here.
	// +optional
	FreeBSD FreeBSDSpec `json:"freebsd,omitempty"`

	// RSSCheck is the static table of local ports per outgoing tuple ([rss_check], v1.25+), for
	// stacks that connect out as clients with several processes.
	// +optional
	RSSCheck *RSSCheckSpec `json:"rssCheck,omitempty"`

	// Pcap dumps every packet each process receives and sends ([pcap]).
	// +optional
	Pcap *PcapSpec `json:"pcap,omitempty"`

	// Shim describes how the app containers reach the stack through libff_syscall.so.
	// +optional
	Shim ShimSpec `json:"shim,omitempty"`

	// Dataplane is the injected container that runs the F-Stack processes.
	// +optional
	Dataplane DataplaneSpec `json:"dataplane,omitempty"`

	// Program runs a program linked with libfstack as the F-Stack processes, in a container of
	// the pod, instead of F-Stack's fstack adapter and the shim. Absent: the adapter, with the
	// shim in the app containers.
	// +optional
	Program *ProgramSpec `json:"program,omitempty"`

	// DrainSeconds is how long a deleted pod keeps serving before its apps and dataplane stop:
	// each container gets a preStop sleep of this long (unless it has its own preStop) while its
	// EndpointSlice endpoints are terminating, and the grace period is raised to cover it. 0:
	// no drain.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +kubebuilder:default=10
	// +optional
	DrainSeconds *int32 `json:"drainSeconds,omitempty"`
}

// StackInstanceStatus is what the operator observed of the spec and the pods bound to it.
type StackInstanceStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Valid (the spec passes every check possible before a pod starts), Ready (every
	// bound pod runs the stack) and ConfigMap (the ConfigMap <name>-fstack holds the rendered preview).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// BoundPods counts the live pods whose StackLabel (kubefstack.io/stack, a label: an annotation
	// of that name is not read) names this StackInstance.
	// +optional
	BoundPods int32 `json:"boundPods,omitempty"`

	// ReadyPods counts the bound pods whose dataplane reports ready.
	// +optional
	ReadyPods int32 `json:"readyPods,omitempty"`

	// Ready is readyPods/boundPods ("2/3"), what the Ready column of kubectl get shows, as for
	// Deployments.
	// +optional
	Ready string `json:"ready,omitempty"`

	// ConfigHash is the hash of the config rendered from the current spec; a pod running another
	// hash runs an older config.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`
}

// StackInstance is the F-Stack stack (processes, ports, addresses, FreeBSD tuning, shim) that every
// pod bound to it runs.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fsi,categories=fstack
// +kubebuilder:printcolumn:name="Processes",type=integer,JSONPath=`.spec.processes`
// +kubebuilder:printcolumn:name="Ports",type=string,JSONPath=`.spec.ports[*].name`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`,description="bound pods whose dataplane is ready / bound pods"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="the Ready condition's reason"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StackInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StackInstanceSpec   `json:"spec"`
	Status StackInstanceStatus `json:"status,omitempty"`
}

// StackInstanceList is a list of StackInstances.
// +kubebuilder:object:root=true
type StackInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StackInstance `json:"items"`
}
