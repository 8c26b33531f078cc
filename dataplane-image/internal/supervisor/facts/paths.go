// Package facts gathers what only the pod knows, for the renderer and the supervisor: the
// StackInstance spec snapshot the pod was admitted with, the CPUs the kubelet gave the dataplane
// (affinity, cross-checked against the container's cpuset), the attachments' device-info files,
// the device plugin's PCI addresses (and the stand-in image's substitutes for them), the
// hugepage mount, and whether the launcher has been placed in the shim volume. It owns the
// paths of the pod contract the dataplane reads (Paths).
package facts

import (
	"path/filepath"

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
		ConfigFile:   filepath.Join(podcontract.DataplaneConfigDir, "config.ini"),
		RouteV4:      "/proc/net/route",
		RouteV6:      "/proc/net/ipv6_route",
	}
}
