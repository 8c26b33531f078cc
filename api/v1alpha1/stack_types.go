package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DPDKSpec holds the [dpdk] knobs of config.ini. The lcore mask and port list are derived.
// +kubebuilder:validation:XValidation:rule="!has(self.noHuge) || !self.noHuge || has(self.memory)",fieldPath=".memory",reason=FieldValueRequired,message="noHuge needs memory: without hugepages DPDK allocates exactly that much ordinary memory"
type DPDKSpec struct {
	// Channels is the number of memory channels (channel, EAL -n).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	// +kubebuilder:default=4
	// +optional
	Channels int32 `json:"channels,omitempty"`

	// Memory DPDK preallocates (memory, EAL -m), a whole number of MiB; keep it within the
	// dataplane's hugepages. Default: DPDK takes what it needs. Written in at most 64 characters,
	// as every quantity of the spec.
	// +kubebuilder:validation:XValidation:rule="type(self) != string || size(self) <= 64",message="a quantity of at most 64 characters"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// NoHuge runs DPDK without hugepages (no_huge). No secondary process can attach then: no
	// shim, no tools, a single process.
	// +optional
	NoHuge bool `json:"noHuge,omitempty"`

	// Promiscuous puts every port in promiscuous mode (promiscuous). F-Stack's default is on.
	// +kubebuilder:default=true
	// +optional
	Promiscuous *bool `json:"promiscuous,omitempty"`

	// NUMA allocates per-NUMA-node mbuf pools (numa_on). F-Stack's default is on.
	// +kubebuilder:default=true
	// +optional
	NUMA *bool `json:"numa,omitempty"`

	// TSO enables TCP segmentation offload where the NIC has it (tso).
	// +optional
	TSO bool `json:"tso,omitempty"`

	// TxChecksumOffloadSkip stops using the NIC's TX checksum offload (tx_csum_offoad_skip).
	// +optional
	TxChecksumOffloadSkip bool `json:"txChecksumOffloadSkip,omitempty"`

	// VLANStrip strips VLAN tags in hardware where supported (vlan_strip). Default on, as in
	// F-Stack's shipped config.
	// +kubebuilder:default=true
	// +optional
	VLANStrip *bool `json:"vlanStrip,omitempty"`

	// IdleSleepMicroseconds is how long a process sleeps after an idle poll (idle_sleep); 0 is
	// pure busy polling, 100% of each CPU.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	IdleSleepMicroseconds int32 `json:"idleSleepMicroseconds,omitempty"`

	// PktTxDelayMicroseconds is the TX drain interval (pkt_tx_delay), 0-100; the shim's fstack
	// process also spins this long per loop. Default 100 (F-Stack's, for keep-alive traffic);
	// 50 with profile ShortConnections.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	PktTxDelayMicroseconds *int32 `json:"pktTxDelayMicroseconds,omitempty"`

	// SymmetricRSS uses a symmetric RSS key (symmetric_rss).
	// +optional
	SymmetricRSS bool `json:"symmetricRSS,omitempty"`

	// BaseVirtAddr is where DPDK maps its memory (base_virtaddr, e.g. 0x7f0000000000); it helps
	// secondaries map hugepages at the primary's addresses when the node keeps ASLR on.
	// +kubebuilder:validation:Pattern=`^0x[0-9a-fA-F]{1,16}$`
	// +optional
	BaseVirtAddr string `json:"baseVirtAddr,omitempty"`

	// FilePrefix sets DPDK's file prefix (file_prefix; F-Stack makes it container-<prefix>). The
	// shim and F-Stack's tools only attach to the default prefix, so it cannot be used with them.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	FilePrefix string `json:"filePrefix,omitempty"`

	// LogLevel is DPDK's global log level (log_level, EAL --log-level), 1-8; 0 keeps DPDK's default.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	// +optional
	LogLevel int32 `json:"logLevel,omitempty"`

	// FStackLogLevel sends F-Stack, FreeBSD and DPDK logs to a file at this level (fstack_log_level,
	// v1.25+), 1 EMERG - 8 DEBUG; 0 keeps logs on stdout, where kubectl logs shows them.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	// +optional
	FStackLogLevel int32 `json:"fstackLogLevel,omitempty"`

	// LcoresPerCPU, LAB ONLY, never for production: up to this many F-Stack processes share one
	// CPU, and the dataplane asks for ceil(processes / lcoresPerCPU) CPUs. Busy-polling lcores on
	// one CPU divide its throughput and wait for each other's time slices. It proves several
	// processes (RSS, one Nginx worker each) on small machines. Above 1 needs flavor KubeFStack.
	//
	// The image's patch 0003 pins each lcore to its CPU with DPDK's --lcores (docs/stackinstance.md).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	// +kubebuilder:default=1
	// +optional
	LcoresPerCPU int32 `json:"lcoresPerCPU,omitempty"`

	// CPUPolicy, LAB ONLY for Shared, never for production: Exclusive (the default) gives the
	// dataplane whole CPUs of a Guaranteed pod, which kubelet's static CPU manager makes
	// exclusive; Shared gives it a fraction of a CPU (100m per CPU it would need, no CPU limit,
	// so the pod is Burstable) and F-Stack's lcores busy-poll on CPUs of the node's shared pool,
	// beside every other pod's processes. It lets several replicas run on a node with one
	// exclusive CPU; latency and throughput then depend on the node's other load.
	// +kubebuilder:default=Exclusive
	// +optional
	CPUPolicy CPUPolicy `json:"cpuPolicy,omitempty"`

	// FStackLogFilePrefix is the log file prefix (fstack_log_file_prefix); files are
	// <prefix><proc id>.log.
	// +kubebuilder:validation:Pattern=`^[^\s;]+$`
	// +kubebuilder:validation:MaxLength=200
	// +optional
	FStackLogFilePrefix string `json:"fstackLogFilePrefix,omitempty"`
}

// CPUPolicy says how the dataplane gets its CPUs.
// +kubebuilder:validation:Enum=Exclusive;Shared
type CPUPolicy string

const (
	// CPUExclusive: whole CPUs of a Guaranteed pod, exclusive under the static CPU manager.
	CPUExclusive CPUPolicy = "Exclusive"
	// CPUShared (lab only): a fraction of a CPU, the lcores on CPUs of the shared pool.
	CPUShared CPUPolicy = "Shared"
)

// KNIMethod says which side the listed ports go to.
// +kubebuilder:validation:Enum=Accept;Reject
type KNIMethod string

const (
	// KNIAccept sends the listed ports to the kernel and everything else to F-Stack.
	KNIAccept KNIMethod = "Accept"
	// KNIReject sends the listed ports to F-Stack and everything else (SSH, ICMP, ...) to the kernel.
	KNIReject KNIMethod = "Reject"
)

// KNIAction is the initial per-process exception-path action.
// +kubebuilder:validation:Enum=Default;AllToKernel;AllToFStack
type KNIAction string

const (
	// KNIActionDefault follows method and the port lists.
	KNIActionDefault KNIAction = "Default"
	// KNIActionAllToKernel sends everything to the kernel (alltokni).
	KNIActionAllToKernel KNIAction = "AllToKernel"
	// KNIActionAllToFStack sends everything to F-Stack (alltoff).
	KNIActionAllToFStack KNIAction = "AllToFStack"
)

// KNISpec is the exception path to the kernel ([kni]). In v1.25 it is a virtio_user port over
// /dev/vhost-net: the node needs the vhost_net module and the dataplane CAP_NET_ADMIN.
// +kubebuilder:validation:XValidation:rule="!self.enabled || has(self.method)",fieldPath=".method",reason=FieldValueRequired,message="method is required when the exception path is enabled"
type KNISpec struct {
	// Enabled creates the exception path (enable).
	Enabled bool `json:"enabled"`

	// Method: Accept sends the listed ports to the kernel, Reject keeps them in F-Stack and sends
	// everything else to the kernel.
	// +optional
	Method KNIMethod `json:"method,omitempty"`

	// TCPPorts are TCP destination ports or ranges ("80", "8000-8080") (tcp_port).
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:Pattern=`^[0-9]{1,5}(-[0-9]{1,5})?$`
	// +optional
	TCPPorts []string `json:"tcpPorts,omitempty"`

	// UDPPorts are UDP destination ports or ranges (udp_port).
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:Pattern=`^[0-9]{1,5}(-[0-9]{1,5})?$`
	// +optional
	UDPPorts []string `json:"udpPorts,omitempty"`

	// Action is each process's initial action (kni_action).
	// +kubebuilder:default=Default
	// +optional
	Action KNIAction `json:"action,omitempty"`

	// ConsolePacketsRateLimit caps ARP/NDP/multicast packets queued to the kernel per process, per
	// second (console_packets_ratelimit); 0 is no limit.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ConsolePacketsRateLimit int32 `json:"consolePacketsRateLimit,omitempty"`

	// GeneralPacketsRateLimit caps other packets queued to the kernel per process, per second
	// (general_packets_ratelimit); 0 is no limit.
	// +kubebuilder:validation:Minimum=0
	// +optional
	GeneralPacketsRateLimit int32 `json:"generalPacketsRateLimit,omitempty"`

	// KernelPacketsRateLimit caps the packets the primary hands to the kernel interface, per second
	// (kernel_packets_ratelimit); 0 is no limit.
	// +kubebuilder:validation:Minimum=0
	// +optional
	KernelPacketsRateLimit int32 `json:"kernelPacketsRateLimit,omitempty"`
}

// FreeBSDSpec tunes the FreeBSD stack. Typed fields cover the common knobs; boot and sysctl take
// any other key. A key may be set only once across both.
type FreeBSDSpec struct {
	// HZ is the stack's clock rate (hz); 1000000 for the RACK and BBR stacks.
	// +kubebuilder:validation:Minimum=1
	// +optional
	HZ *int32 `json:"hz,omitempty"`

	// PhysMem is the memory FreeBSD auto-tuning assumes (physmem).
	// +kubebuilder:validation:XValidation:rule="type(self) != string || size(self) <= 64",message="a quantity of at most 64 characters"
	// +optional
	PhysMem *resource.Quantity `json:"physMem,omitempty"`

	// FDReserve is where F-Stack socket descriptors start (fd_reserve).
	// +kubebuilder:validation:Minimum=0
	// +optional
	FDReserve *int32 `json:"fdReserve,omitempty"`

	// MaxFiles caps the stack's descriptors (kern.maxfiles, boot); at most 65536 with the
	// KernelEvent shim.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxFiles *int32 `json:"maxFiles,omitempty"`

	// SoMaxConn is the listen backlog limit (kern.ipc.somaxconn).
	// +kubebuilder:validation:Minimum=1
	// +optional
	SoMaxConn *int32 `json:"soMaxConn,omitempty"`

	// TCBHashSize is the TCP control block hash size (net.inet.tcp.tcbhashsize, boot), a power of two.
	// +kubebuilder:validation:Minimum=1
	// +optional
	TCBHashSize *int32 `json:"tcbHashSize,omitempty"`

	// SyncacheHashSize is the SYN cache hash size (net.inet.tcp.syncache.hashsize, boot), a power
	// of two.
	// +kubebuilder:validation:Minimum=1
	// +optional
	SyncacheHashSize *int32 `json:"syncacheHashSize,omitempty"`

	// DelayedAck enables delayed ACKs (net.inet.tcp.delayed_ack).
	// +optional
	DelayedAck *bool `json:"delayedAck,omitempty"`

	// CongestionControl is the TCP congestion control algorithm (net.inet.tcp.cc.algorithm), at
	// most 32 characters (FreeBSD's own limit is 16).
	// +kubebuilder:validation:Pattern=`^[a-z0-9_]+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	CongestionControl string `json:"congestionControl,omitempty"`

	// FunctionsDefault is the default TCP stack (net.inet.tcp.functions_default): freebsd, rack or
	// bbr; at most 32 characters, FreeBSD's limit for a stack name.
	// +kubebuilder:validation:Pattern=`^[a-z0-9_]+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	FunctionsDefault string `json:"functionsDefault,omitempty"`

	// PortRangeRandomized randomizes ephemeral ports (net.inet.ip.portrange.randomized).
	// +optional
	PortRangeRandomized *bool `json:"portRangeRandomized,omitempty"`

	// PortRangeRandomTime (net.inet.ip.portrange.randomtime).
	// +kubebuilder:validation:Minimum=0
	// +optional
	PortRangeRandomTime *int32 `json:"portRangeRandomTime,omitempty"`

	// FastFinWait2Recycle recycles FIN_WAIT_2 connections quickly
	// (net.inet.tcp.fast_finwait2_recycle).
	// +optional
	FastFinWait2Recycle *bool `json:"fastFinWait2Recycle,omitempty"`

	// FinWait2TimeoutMilliseconds (net.inet.tcp.finwait2_timeout).
	// +kubebuilder:validation:Minimum=0
	// +optional
	FinWait2TimeoutMilliseconds *int32 `json:"finWait2TimeoutMilliseconds,omitempty"`

	// MaxTCPTimeWait caps TIME_WAIT state entries (net.inet.tcp.maxtcptw).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxTCPTimeWait *int32 `json:"maxTCPTimeWait,omitempty"`

	// Boot are further boot-time tunables ([freebsd.boot]): at most 256, names and values of at
	// most 128 characters. F-Stack sets each with FreeBSD's kern_setenv, which refuses a longer
	// name or value (KENV_MNAMELEN, KENV_MVALLEN) and F-Stack only logs "kern_setenv failed".
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 128 && size(self[k]) <= 128)",message="names and values of at most 128 characters (FreeBSD's kenv limits)"
	// +optional
	Boot map[string]string `json:"boot,omitempty"`

	// Sysctl are further run-time sysctls ([freebsd.sysctl]): at most 256, names of at most 128
	// characters and values of at most 256.
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 128 && size(self[k]) <= 256)",message="names of at most 128 characters, values of at most 256"
	// +optional
	Sysctl map[string]string `json:"sysctl,omitempty"`
}

// RSSCheckSpec is the static RSS table ([rss_check]): for each outgoing (local address, remote
// address, remote port) F-Stack precomputes local ports that hash back to the same process.
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || (has(self.entries) && size(self.entries) > 0)",fieldPath=".entries",reason=FieldValueRequired,message="an enabled rssCheck needs entries"
type RSSCheckSpec struct {
	// Enabled builds the table at start-up (enable). Default off, as in F-Stack; with profile
	// Proxy, on when entries are listed.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Entries of the table (rss_tbl): at most 64, at most 16 distinct remote address:port pairs,
	// at most 4 local addresses per pair.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Entries []RSSCheckEntry `json:"entries,omitempty"`
}

// RSSCheckEntry is one (port, local address, remote address, remote port) tuple.
type RSSCheckEntry struct {
	// Port is the name of the port the connections leave by.
	// +kubebuilder:validation:MaxLength=32
	Port string `json:"port"`

	// LocalAddress is the IPv4 address connections leave from: the port's address or a VIP.
	// +kubebuilder:validation:MaxLength=15
	LocalAddress string `json:"localAddress"`

	// RemoteAddress is the IPv4 address connections go to.
	// +kubebuilder:validation:MaxLength=15
	RemoteAddress string `json:"remoteAddress"`

	// RemotePort is the TCP/UDP port connections go to.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	RemotePort int32 `json:"remotePort"`
}

// PcapSpec dumps packets to files ([pcap]).
type PcapSpec struct {
	// Enabled dumps every packet of each process (enable).
	Enabled bool `json:"enabled"`

	// SnapLength is the bytes kept per packet (snaplen); at least 94.
	// +kubebuilder:validation:Minimum=94
	// +kubebuilder:validation:Maximum=65535
	// +optional
	SnapLength int32 `json:"snapLength,omitempty"`

	// FileSize rotates a file after this many bytes (savelen); at least 8Mi.
	// +kubebuilder:validation:XValidation:rule="type(self) != string || size(self) <= 64",message="a quantity of at most 64 characters"
	// +optional
	FileSize *resource.Quantity `json:"fileSize,omitempty"`

	// Directory the files are written to (savepath); files are <dir>/cpu<lcore>_<n>.pcap and the
	// whole path must fit in 63 characters.
	// +kubebuilder:validation:Pattern=`^/[^\s;]*$`
	// +kubebuilder:validation:MaxLength=40
	// +optional
	Directory string `json:"directory,omitempty"`
}

// ShimSpec says whether and how the app containers use F-Stack through libff_syscall.so.
// +kubebuilder:validation:XValidation:rule="!(has(self.polling) && self.polling && (!has(self.kernelEvent) || self.kernelEvent))",fieldPath=".polling",message="polling and kernelEvent cannot be combined (polling is silently disabled with kernelEvent): set kernelEvent=false or polling=false"
type ShimSpec struct {
	// Enabled preloads libff_syscall.so into the app containers. Default on, and off with
	// spec.program (a program linked with libfstack uses no shim): the default depends on another
	// field, so the renderer sets it, not the schema; so do the two below.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// KernelEvent (FF_KERNEL_EVENT) lets epoll serve F-Stack and kernel descriptors together, as
	// Nginx needs. Default on without spec.program. Needs kern.maxfiles <= 65536.
	// +optional
	KernelEvent *bool `json:"kernelEvent,omitempty"`

	// MultiSC (FF_MULTI_SC) gives each Nginx reuseport worker its own context. Default on
	// without spec.program.
	// +optional
	MultiSC *bool `json:"multiSC,omitempty"`

	// ThreadSocket (FF_THREAD_SOCKET) gives each thread its own context.
	// +optional
	ThreadSocket bool `json:"threadSocket,omitempty"`

	// Polling (FF_PRELOAD_POLLING_MODE) busy-polls in epoll_wait; not with kernelEvent.
	// +optional
	Polling bool `json:"polling,omitempty"`

	// Containers that get the shim; default: every app container of the pod. At most 64 names of
	// at most 63 characters (a container name is a DNS label).
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Containers []string `json:"containers,omitempty"`
}

// HugePageSize is a hugepage size the dataplane can use.
// +kubebuilder:validation:Enum="2Mi";"1Gi"
type HugePageSize string

const (
	// HugePages2Mi are 2 MiB pages.
	HugePages2Mi HugePageSize = "2Mi"
	// HugePages1Gi are 1 GiB pages.
	HugePages1Gi HugePageSize = "1Gi"
)

// ImageFlavor says which F-Stack build the dataplane image carries.
// +kubebuilder:validation:Enum=KubeFStack;Upstream
type ImageFlavor string

const (
	// FlavorKubeFStack is kube-fstack's image: F-Stack patched to keep DPDK's default file prefix
	// with vhost-user ports (so the shim and tools attach) and to pass --single-file-segments (so
	// vhost-user works with 2 MiB pages).
	FlavorKubeFStack ImageFlavor = "KubeFStack"
	// FlavorUpstream is an unpatched F-Stack release.
	FlavorUpstream ImageFlavor = "Upstream"
)

// HugePagesSpec is the hugepage memory of the dataplane, shared with the app containers.
type HugePagesSpec struct {
	// PageSize of the hugepages. Default 2Mi, except 1Gi on the Upstream flavor with a vhost-user
	// port: unpatched F-Stack cannot use vhost-user with 2 MiB pages (at most 8 memory regions).
	// The default depends on other fields, so the schema does not set it: the renderer does, and
	// the operator, the dataplane and `kubectl fstack render` all render through it.
	// +optional
	PageSize HugePageSize `json:"pageSize,omitempty"`

	// Amount of hugepage memory the pod requests.
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="type(self) != string || size(self) <= 64",message="a quantity of at most 64 characters"
	// +optional
	Amount *resource.Quantity `json:"amount,omitempty"`
}

// DataplaneSpec is the injected container that runs the F-Stack processes.
type DataplaneSpec struct {
	// Image of the dataplane; default: the operator's configured image. At most 1024 characters
	// (the longest reference the image grammar allows is about 520).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Image string `json:"image,omitempty"`

	// Flavor of the F-Stack build in the image.
	// +kubebuilder:default=KubeFStack
	// +optional
	Flavor ImageFlavor `json:"flavor,omitempty"`

	// HugePages of the pod; default 1Gi of 2Mi pages (1Gi of 1Gi pages for vhost-user ports on the
	// Upstream flavor).
	// +optional
	HugePages HugePagesSpec `json:"hugePages,omitempty"`

	// Resources added to the dataplane container beyond the CPUs (one per process) and hugepages:
	// at most 16 limits and 16 requests, resource names of at most 253 characters (a qualified
	// name) and quantities of at most 64, at most 16 claims whose name and request are DNS labels (at most 63 characters).
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || (size(self.limits) <= 16 && self.limits.all(k, size(k) <= 253 && (type(self.limits[k]) != string || size(self.limits[k]) <= 64)))",fieldPath=".limits",message="at most 16 resources, names of at most 253 characters, quantities of at most 64"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || (size(self.requests) <= 16 && self.requests.all(k, size(k) <= 253 && (type(self.requests[k]) != string || size(self.requests[k]) <= 64)))",fieldPath=".requests",message="at most 16 resources, names of at most 253 characters, quantities of at most 64"
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || (size(self.claims) <= 16 && self.claims.all(c, size(c.name) <= 63 && (!has(c.request) || size(c.request) <= 63)))",fieldPath=".claims",message="at most 16 claims, names and requests of at most 63 characters"
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}
