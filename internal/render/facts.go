package render

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Facts are what only the running pod knows. The dataplane gathers them at container start; the
// operator and the CLI use placeholders or what the user passes.
type Facts struct {
	// DataplaneCPUs are the CPUs of the dataplane container's cpuset (the exclusive CPUs kubelet
	// gave it), ascending. F-Stack process k runs on DataplaneCPUs[k].
	DataplaneCPUs []int
	// AppCPUs are the CPUs of the app container, ascending; the shim's DPDK secondary is pinned to
	// the first. Empty when unknown: FF_INITIAL_LCORE_ID is then left to the app side.
	AppCPUs []int
	// PCIResources maps an SR-IOV device-plugin resource to the PCI addresses allocated to the pod
	// (PCIDEVICE_<RESOURCE>), in the device plugin's order.
	PCIResources map[string][]string
	// Attachments maps a network attachment (CNI interface name) to what its CNI plugin reported.
	Attachments map[string]Attachment
	// ShimLibrary is the path of libff_syscall.so in the app containers.
	ShimLibrary string
}

// Attachment is what the CNI plugin wrote about one network attachment of the pod.
type Attachment struct {
	// SocketPath is the vhost-user socket as the dataplane container sees it.
	SocketPath string
	// Server means the pod's DPDK owns the socket (the CNI plugin's device info says mode
	// "server": OVS is the client and reconnects across dataplane restarts).
	Server bool
	// MAC of the attachment.
	MAC string
	// IPs in CIDR notation, IPv4 and IPv6.
	IPs []string
	// Gateways reported by IPAM.
	Gateways []string
	// Placeholder marks facts invented for rendering before a pod exists; checks that compare
	// the spec with real facts are skipped for them.
	Placeholder bool
}

// DefaultShimLibrary is where the injected app containers find libff_syscall.so.
const DefaultShimLibrary = podcontract.ShimDir + "/" + podcontract.ShimLibrary

// DefaultPodSocketDir is where the dataplane container sees the vhost-user sockets the CNI plugin
// made for the pod.
const DefaultPodSocketDir = podcontract.PodSocketDir

// ParseCPUList parses the kernel's cpu list format ("2-5,8,10-11"), as in cpuset.cpus and
// /proc/self/status Cpus_allowed_list. The result is ascending without duplicates.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	set := map[int]bool{}
	for _, tok := range strings.Split(s, ",") {
		lo, hi, err := parseRange(strings.TrimSpace(tok))
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		for c := lo; c <= hi; c++ {
			set[c] = true
		}
	}
	cpus := make([]int, 0, len(set))
	for c := range set {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	return cpus, nil
}

func parseRange(tok string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(tok, "-")
	if lo, err = strconv.Atoi(a); err != nil || lo < 0 {
		return 0, 0, fmt.Errorf("%q is not a CPU number or range", tok)
	}
	hi = lo
	if isRange {
		if hi, err = strconv.Atoi(b); err != nil || hi < lo {
			return 0, 0, fmt.Errorf("%q is not a CPU range low-high", tok)
		}
	}
	if hi-lo > 4096 {
		return 0, 0, fmt.Errorf("%q is too large a range", tok)
	}
	return lo, hi, nil
}

// FormatCPUList is the inverse of ParseCPUList.
func FormatCPUList(cpus []int) string { return intList(cpus) }

// PCIResourceEnv is the environment variable the SR-IOV device plugin sets for a resource:
// PCIDEVICE_ + the resource name upper-cased with every non-alphanumeric character as '_'.
func PCIResourceEnv(resource string) string {
	b := []byte("PCIDEVICE_" + strings.ToUpper(resource))
	for i := len("PCIDEVICE_"); i < len(b); i++ {
		c := b[i]
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// PCIResourceEnvNames are the spellings of PCIDEVICE_<RESOURCE> to look for, PCIResourceEnv's
// first. The SR-IOV network device plugin joins its resource prefix and name with '_' and
// replaces only '.', so a '-' (legal in a resource's domain and name) stays in its variable:
// "my-nic.example/vf" gives PCIDEVICE_MY-NIC_EXAMPLE_VF.
func PCIResourceEnvNames(resource string) []string {
	names := []string{PCIResourceEnv(resource)}
	domain, name, _ := strings.Cut(resource, "/")
	if plugin := strings.ToUpper("PCIDEVICE_" + strings.ReplaceAll(domain, ".", "_") + "_" + name); plugin != names[0] {
		names = append(names, plugin)
	}
	return names
}
