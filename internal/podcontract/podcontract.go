// Package podcontract holds the names, paths and file formats an injected pod is built from, and
// the node-side facts behind them. The injector (operator and CLI) writes them into the pod; the
// CNI plugin makes the pod's vhost-user sockets and device-info files (devinfo.go) where the
// dataplane looks for them; the dataplane supervisor and the app-side launcher read them at run
// time. Changing a value here changes the contract between all four, so each constant says who
// relies on it. fstack-cni and fstack-launcher import this package, so it stays light: the
// standard library, golang.org/x/sys and internal/fsutil only (deps_test.go).
package podcontract

// The injected dataplane container.
const (
	// DataplaneContainer is the name of the injected native sidecar.
	DataplaneContainer = "fstack-dataplane"
	// SupervisorPort serves /readyz, /healthz and /metrics on the pod's kernel network; the
	// readiness and liveness probes of the dataplane use it.
	SupervisorPort = 9180
	// MetricsPortName names SupervisorPort in the dataplane container: the chart's PodMonitor
	// selects the port by it.
	MetricsPortName = "fstack-metrics"
	// SupervisorBinary is where every dataplane image (the real one and the stand-in) has the
	// supervisor: the injected postStart hook runs `SupervisorBinary WaitPlacedCommand`.
	SupervisorBinary = "/usr/local/bin/fstack-supervisor"
	// WaitPlacedCommand is the supervisor's subcommand that returns once the launcher is in
	// ShimDir: the dataplane's postStart hook, so the kubelet starts the app containers (whose
	// command is the launcher) only then.
	WaitPlacedCommand = "wait-placed"
	// ReadyzPath answers 200 once every F-Stack process is up and the shim is in place.
	ReadyzPath = "/readyz"
	// StartedzPath answers 200 once the shim's files (the launcher first of all) are in the
	// shim volume, and otherwise why not: the postStart hook quotes it when it fails.
	StartedzPath = "/startedz"
	// ProbeWait is the query that makes /readyz (and /startedz) hold a failing answer until the
	// condition holds or this much time passes: a probe every second then sees a change within
	// milliseconds, where a plain probe sees it up to a period late.
	ProbeWait = "?wait=900ms"
	// HealthzPath answers 200 while every F-Stack process is alive.
	HealthzPath = "/healthz"
	// MetricsPath is the Prometheus endpoint.
	MetricsPath = "/metrics"
)

// Volumes shared between the dataplane and the app containers, with where they are mounted.
const (
	// HugePagesVolume is an emptyDir{medium: HugePages-<size>}. DPDK secondaries reopen the
	// primary's hugepage files by the path the primary recorded, so every container mounts it at
	// the same HugePagesDir.
	HugePagesVolume = "fstack-hugepages"
	HugePagesDir    = "/dev/hugepages"

	// DPDKRuntimeVolume is an emptyDir holding DPDK's runtime directory (config, mp_socket,
	// telemetry) that secondaries find by the default path for root.
	DPDKRuntimeVolume = "fstack-dpdk-runtime"
	DPDKRuntimeDir    = "/var/run/dpdk"

	// ShimVolume is an emptyDir the supervisor fills from ImageShimDir before it reports ready:
	// libff_syscall.so, the launcher, and the generation and ready markers. Only the dataplane
	// writes it; the app containers mount it read-only, since they run the launcher and preload
	// the shim from it, and one that could write it could replace either for its siblings.
	ShimVolume = "fstack-shim"
	ShimDir    = "/var/run/kube-fstack/shim"

	// AppStateVolume is an emptyDir holding what the app side writes (appstate.go): each app
	// container mounts only its own sub-directory, named after the container (subPath), at
	// AppStateDir, and writes nothing else; the dataplane mounts the whole volume at the same
	// path and only reads (and clears) what the launchers wrote, as hostile input.
	AppStateVolume = "fstack-app-state"
	AppStateDir    = "/var/run/kube-fstack/app"

	// VhostVolume is an emptyDir, mounted by the dataplane at PodSocketDir, that the CNI plugin
	// fills with the device-info files and where the pod's DPDK makes its vhost-user sockets. On
	// the node, the plugin links HostSocketRoot/<pod UID> to it for OVS (the emptyDir's own path
	// is too long for a socket's), in a directory no pod mounts.
	VhostVolume    = "fstack-vhost"
	HostSocketRoot = "/var/run/kube-fstack/vhost"
	PodSocketDir   = "/var/run/kube-fstack/vhost"

	// HostStateRoot and HostLogRoot are the project's other directories on the nodes (the
	// socket root's parent, the CNI plugin's log). No pod of an opted-in namespace may mount a
	// hostPath at, under or above them or the socket root (inject.CheckHostPaths).
	HostStateRoot = "/var/run/kube-fstack"
	HostLogRoot   = "/var/log/kube-fstack"

	// PodInfoVolume is a downward-API volume: the spec snapshot the pod was admitted with and the
	// pod's identity (files named below).
	PodInfoVolume = "fstack-podinfo"
	PodInfoDir    = "/etc/kube-fstack/podinfo"

	// DataplaneScratchVolume holds what the injected dataplane container writes beyond the
	// volumes above, its root filesystem being read-only (shareProcessNamespace lets any root
	// container of the pod write another's root through /proc/<pid>/root): config.ini in
	// DataplaneConfigDir, /tmp, and DataplaneWorkDir, its working directory, where F-Stack's
	// log files go with the default relative fstack_log_file_prefix. Each is a subPath of it.
	DataplaneScratchVolume = "fstack-dataplane-scratch"
	DataplaneConfigDir     = "/etc/f-stack"
	DataplaneTmpDir        = "/tmp"
	DataplaneWorkDir       = "/var/log/f-stack"
)

// InjectedVolumes are the names of every volume the injector may add. They are reserved: a pod
// may neither declare nor mount them itself (they hold the pod's DPDK state and its vhost-user
// sockets, which only the dataplane and the shim's containers may touch).
func InjectedVolumes() []string {
	return []string{HugePagesVolume, DPDKRuntimeVolume, ShimVolume, AppStateVolume, PodInfoVolume, VhostVolume, DataplaneScratchVolume}
}

// The dataplane container's Localhost seccomp profile, which the node agent installs on every
// node: the runtime's default profile plus the NUMA memory-policy calls DPDK makes, so the
// container needs no SYS_NICE (cni/internal/seccompprofile).
const (
	// SeccompProfileDir is the profile's directory beneath the kubelet's seccomp root
	// (<kubelet root dir>/seccomp), the only one the node agent writes.
	SeccompProfileDir = "kube-fstack"
	// SeccompProfileFile is the profile's file name in SeccompProfileDir.
	SeccompProfileFile = "dataplane.json"
	// SeccompLocalhostProfile is what a container's seccompProfile.localhostProfile names.
	SeccompLocalhostProfile = SeccompProfileDir + "/" + SeccompProfileFile
)

// Files of the downward-API volume (in PodInfoDir).
const (
	// PodInfoSpec is the StackInstance spec (JSON) from SpecAnnotation.
	PodInfoSpec = "spec"
	// PodInfoSpecVersion is SpecVersionAnnotation, beside PodInfoSpec; empty in a pod whose
	// injection wrote no version, missing in one whose injection did not project it.
	PodInfoSpecVersion = "spec-version"
	// PodInfoConfigHash is the placeholder-rendered config hash from ConfigHashAnnotation.
	PodInfoConfigHash = "config-hash"
	// PodInfoStack is the StackInstance name.
	PodInfoStack     = "stack"
	PodInfoName      = "name"
	PodInfoNamespace = "namespace"
	PodInfoUID       = "uid"
	PodInfoLabels    = "labels"
)

// Pod annotations written at injection.
const (
	// SpecAnnotation snapshots the StackInstance spec (defaults applied, JSON) at admission, so a
	// running pod keeps the config it was created with when the StackInstance changes.
	SpecAnnotation = "kubefstack.io/spec"
	// SpecVersionAnnotation is the API version (group/version, e.g. kubefstack.io/v1alpha1) of the
	// StackInstance whose spec SpecAnnotation holds, so that a reader checks it before decoding
	// and a later version can convert. A sibling rather than a wrapper around the spec: the
	// snapshot stays the bare spec that dataplane images before it read (a StackInstance may pin
	// an older image), and the version is one plain string a reader compares without parsing
	// anything. A pod without it was injected before versions were written: v1alpha1.
	SpecVersionAnnotation = "kubefstack.io/spec-version"
	// ConfigHashAnnotation is render.ConfigHash of the spec rendered with placeholder facts; the
	// controller compares it with the StackInstance's current hash.
	ConfigHashAnnotation = "kubefstack.io/config-hash"
)

// Every injected pod carries its StackInstance's spec (defaults applied, JSON) in SpecAnnotation,
// and the API server refuses a pod whose annotations (names and values) exceed 256 KiB in total.
// A spec whose snapshot takes most of that would be admitted and then make every pod that names
// it fail at creation, so admission keeps it to half: the other half is left for the status,
// config-hash and app-probe annotations the injection adds (a few KiB) and for the pod's own
// annotations. Readers hold the snapshot to the same bound (internal/podcontract/snapshot): one
// larger was not written by the injector.
const (
	// PodAnnotationLimit is the API server's limit on a pod's annotations, names and values.
	PodAnnotationLimit = 256 << 10
	// MaxSpecSnapshot is the largest spec snapshot an injected pod may carry.
	MaxSpecSnapshot = PodAnnotationLimit / 2
)

// What the image carries and what lands in ShimDir.
const (
	// ImageShimDir holds, in the dataplane image, what is copied into ShimDir: its top-level
	// files (the launcher) as they are, and <mode>/ShimLibrary of the spec's shim mode (one
	// directory per build mode, named by the supervisor's ShimMode, e.g. kernel-event+multi-sc,
	// each with the fstack binary built with the same flags).
	ImageShimDir = "/opt/kube-fstack/shim"
	// ShimLibrary is libff_syscall.so's file name (LD_PRELOAD = ShimDir/ShimLibrary).
	ShimLibrary = "libff_syscall.so"
	// ShimLibDir, in ImageShimDir and in ShimDir, holds the shim's own non-glibc libraries
	// (libnuma, libcrypto, ...): the shim finds them through its run path $ORIGIN/lib, so an app
	// image needs only glibc (dataplane-image/build/package.sh).
	ShimLibDir = "lib"
	// Launcher is a static binary the app containers run as their command: it waits for the
	// dataplane, records the generation it started against, and runs the original command with
	// the shim's environment (shimenv.go), which nothing else in the container gets. Its word on whether the app can serve
	// (AppBrokenDir) is part of every app probe.
	Launcher = "fstack-launcher"
	// GenerationFile holds a decimal counter the supervisor increments each time it starts, before
	// starting F-Stack. It survives container restarts (the emptyDir does).
	GenerationFile = "generation"
	// ReadyFile holds the generation whose F-Stack processes are all up; the supervisor removes it
	// when any process dies or it stops.
	ReadyFile = "ready"
)

// Who writes what. The dataplane writes ShimDir alone (the app containers mount it read-only):
// the launcher, the shim and its libraries, GenerationFile, ReadyFile, config.ini, the shim
// context readings and its answers to restart requests (internal/shimctx). An app container's
// launcher writes only its own directory of AppStateVolume: AppStartedFile, AppBrokenFile and
// its restart request. The supervisor runs as root and reads those, and the DPDK runtime
// directory every app's secondaries write, as hostile input: through fsutil's OpenRegular
// (beneath the held directory, no symlink, no FIFO, bounded).
const (
	// AppStartedFile, in the container's own directory of AppStateVolume, holds the generation
	// that container's app started against, for people and tools.
	AppStartedFile = "generation"
)

// Environment variables of the injected containers.
const (
	EnvPodUID       = "POD_UID"
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
	// EnvContainerName tells the launcher its container's name, which names its files.
	EnvContainerName = "FSTACK_CONTAINER_NAME"
	// EnvNodeIPs is the node's addresses (the downward API's status.hostIPs, comma-separated):
	// the supervisor answers /app-probe only to them and to the pod's default gateway, where
	// the kubelet's probes come from.
	EnvNodeIPs = "FSTACK_NODE_IPS"
)
