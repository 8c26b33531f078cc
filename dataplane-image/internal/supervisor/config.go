// Package supervisor is the dataplane container's entrypoint logic: it gathers the facts only
// the pod knows, renders config.ini with the shared renderer, starts F-Stack's processes in the
// order DPDK multi-process needs (primary, readiness, secondaries), places the shim for the app
// containers, reports readiness and metrics, and exits as soon as any process dies.
package supervisor

import (
	"context"
	"path/filepath"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Paths are every place the supervisor reads or writes; tests relocate them.
type Paths struct {
	// SpecFile is the StackInstance spec snapshot (JSON).
	SpecFile string
	// PodInfoDir is the downward-API volume (identity files).
	PodInfoDir string
	// PodSocketDir holds the CNI plugin's <ifname>.json device-info files and sockets.
	PodSocketDir string
	// HugePagesDir is the hugetlbfs mount shared with the app containers.
	HugePagesDir string
	// RuntimeDir is DPDK's runtime root (prefix directories live in it).
	RuntimeDir string
	// ShimDir is the volume the supervisor fills for the app containers (read-only to them).
	ShimDir string
	// AppStateDir is the volume the app containers' launchers write, one directory each
	// (podcontract.AppStateVolume): read as hostile input.
	AppStateDir string
	// ImageShimDir is what the image carries for ShimDir.
	ImageShimDir string
	// ConfigFile is where config.ini is written for F-Stack.
	ConfigFile string
	// CpusetFile is the container's cpuset (cgroup v1 cpuset.cpus or v2 cpuset.cpus.effective),
	// used to cross-check the affinity; empty finds it in the process's own cgroup (v1 or v2),
	// CpusetNone skips the check.
	CpusetFile string
	// RouteV4 and RouteV6 are the pod's route tables (/proc/net/route, /proc/net/ipv6_route),
	// read for the default gateway the kubelet probes from on bridge CNIs (node.go).
	RouteV4, RouteV6 string
}

// CpusetNone as Paths.CpusetFile turns the cpuset cross-check off.
const CpusetNone = "none"

// DefaultPaths are the in-pod paths of the contract.
func DefaultPaths() Paths {
	return Paths{
		SpecFile:     filepath.Join(podcontract.PodInfoDir, podcontract.PodInfoSpec),
		PodInfoDir:   podcontract.PodInfoDir,
		PodSocketDir: podcontract.PodSocketDir,
		HugePagesDir: podcontract.HugePagesDir,
		RuntimeDir:   podcontract.DPDKRuntimeDir,
		ShimDir:      podcontract.ShimDir,
		AppStateDir:  podcontract.AppStateDir,
		ImageShimDir: podcontract.ImageShimDir,
		ConfigFile:   "/etc/f-stack/config.ini",
		RouteV4:      "/proc/net/route",
		RouteV6:      "/proc/net/ipv6_route",
	}
}

// Launch says what program runs as each F-Stack process.
type Launch struct {
	// FStack is F-Stack's binary (adapter/syscall's fstack), run with F-Stack's own CLI.
	FStack string
	// ProgramMode runs Program (and SecondaryProgram) with the renderer's EAL argv instead, so a
	// plain DPDK program stands in for F-Stack with exactly the arguments F-Stack would build.
	ProgramMode      bool
	Program          string
	SecondaryProgram string // empty: Program
	// PrimaryArgs and SecondaryArgs are the program's own arguments, after "--". {proc} and
	// {procs} expand to the process index and count.
	PrimaryArgs, SecondaryArgs []string
	// LcoresPerProc > 1 replaces F-Stack's -c<one CPU> with that many lcores all pinned on that
	// same CPU (--lcores=0@c,1@c): testpmd wants a forwarding lcore besides its main one.
	LcoresPerProc int
	// PCIStandin, in program mode, replaces PCI devices DPDK cannot probe here (standin_pci.go).
	PCIStandin *PCIStandin
	// Native runs a program linked with libfstack (the StackInstance's spec.program) instead of
	// F-Stack's fstack: PerProcess starts NativeArgv once per F-Stack process with F-Stack's own
	// arguments appended, as F-Stack's start.sh; Nginx starts NativeArgv, F-Stack's Nginx, once,
	// and its master forks the processes (nginx.go).
	Native     fsv1.ProgramMode
	NativeArgv []string
	// NginxBuild asks F-Stack's Nginx for its compiled-in paths (nginx -V) when its command
	// line does not name the configuration file absolutely; nil runs it.
	NginxBuild func(ctx context.Context, binary string) (nginxconf.Build, error)
}

// Timing bounds every wait.
type Timing struct {
	// StartTimeout bounds the primary's readiness (and each secondary's).
	StartTimeout time.Duration
	// Grace is how long children get between SIGTERM and SIGKILL.
	Grace time.Duration
	// Poll is the readiness polling interval.
	Poll time.Duration
	// SecondariesTimeout bounds the wait, before a new primary starts, for the previous
	// generation's DPDK secondaries (the apps) to let go of its runtime files.
	SecondariesTimeout time.Duration
}

// Config is everything the supervisor is told.
type Config struct {
	Paths  Paths
	Launch Launch
	Timing Timing
	// ReadyCommand, when set, must exit 0 for process {proc} to count as ready (real F-Stack:
	// ff_traffic -p {proc} -s). Without it the primary is ready when its EAL finished init and
	// a secondary when it has joined the primary's IPC channel.
	ReadyCommand []string
	// ReadyTelemetry are telemetry commands the primary must answer before secondaries start,
	// each "command" (any non-empty reply) or "command~text" (the reply contains text). EAL
	// init is not enough for an application that creates its shared objects after it: a
	// secondary started then dies looking them up (testpmd: /mempool/list~mb_pool_0).
	ReadyTelemetry []string
	// RequireShim fails the start when the image has no libff_syscall.so for the spec's shim
	// mode (--require-shim=false only warns).
	RequireShim bool
	// AppProbes is podcontract.EnvAppProbes: the app probes the injector rewrote to this
	// supervisor, performed by ProbeAgent through F-Stack (appprobe.go).
	AppProbes  string
	ProbeAgent string
	// NodeIPs is podcontract.EnvNodeIPs: with the pod's default gateways, the only callers
	// /app-probe answers and the ones the connection cap always lets in (node.go, http.go).
	NodeIPs string
	// ShimContexts says where the shim's free contexts are counted: ContextsZone (F-Stack's
	// memzones), ContextsStandin (the stand-in's slot files) or ContextsOff.
	ShimContexts string
	// ContextsInterval is how often they are read and published for the launchers.
	ContextsInterval time.Duration
	// StandinContextsDelay is how long after a generation's start the stand-in's slot files
	// appear (ContextsStandin): F-Stack creates its zones only after ff_init returns, after the
	// port is up, and the stand-in must show the same gap.
	StandinContextsDelay time.Duration
}
