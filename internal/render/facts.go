package render

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Facts are what only the running pod knows. The dataplane gathers them at container start; the
// operator and the CLI use placeholders or what the user passes.
type Facts struct {
	// DataplaneCPUs are the CPUs of the dataplane container's cpuset the lcores run on (the
	// exclusive CPUs kubelet gave it; under the lab's cpuPolicy Shared those of the shared pool
	// podcontract.PlaceLcores picked), ascending. F-Stack process k runs on DataplaneCPUs[k], or,
	// with lcores sharing CPUs (spec.dpdk.lcoresPerCPU, lab only), on
	// DataplaneCPUs[k mod len(DataplaneCPUs)].
	DataplaneCPUs []int
	// AppCPUs are the CPUs of the app container, ascending; the launcher pins the shim's DPDK
	// secondary to the first (ShimEAL shows it). Empty when unknown.
	AppCPUs []int
	// PCIResources maps an SR-IOV device-plugin resource to the PCI addresses allocated to the pod
	// (PCIDEVICE_<RESOURCE>), in the device plugin's order.
	PCIResources map[string][]string
	// Attachments maps a network attachment (CNI interface name) to what its CNI plugin reported.
	Attachments map[string]Attachment
	// Placement is where the dataplane put its lcores (podcontract.PlaceLcores), for the app
	// containers' launchers; nil when no pod was looked at.
	Placement *podcontract.Placement
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
	// SwitchCPUs are the CPUs the switch's PMD threads poll on, as the CNI plugin read them.
	SwitchCPUs []int
	// Placeholder marks facts invented for rendering before a pod exists; checks that compare
	// the spec with real facts are skipped for them.
	Placeholder bool
}

// DefaultPodSocketDir is where the dataplane container sees the vhost-user sockets the CNI plugin
// made for the pod.
const DefaultPodSocketDir = podcontract.PodSocketDir

// MaxCPU is the highest CPU number ParseCPUList accepts: Linux's NR_CPUS is at most 8192, and a
// range is expanded one CPU at a time, so a bound keeps "0-2000000000" from taking the memory.
const MaxCPU = podcontract.MaxCPU

// ParseCPUList parses the kernel's cpu list format ("2-5,8,10-11"), as in cpuset.cpus and
// /proc/self/status Cpus_allowed_list. The result is ascending without duplicates; an empty list
// is nil.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, n := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '-' }) {
		if c, err := strconv.Atoi(n); err == nil && c > MaxCPU {
			return nil, fmt.Errorf("cpu list %q: CPU %d is above %d, the highest CPU number Linux has", s, c, MaxCPU)
		}
	}
	set, err := cpuset.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("cpu list %q is not a list of CPU numbers and ranges low-high like 0-3,8: %w", s, err)
	}
	return set.List(), nil
}

// FormatCPUList is the inverse of ParseCPUList: runs fold into ranges ("0-3,8").
func FormatCPUList(cpus []int) string { return cpuset.New(cpus...).String() }

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

// The pod's facts are parsed and checked by the functions below wherever they come from: the
// dataplane's supervisor reads them from the pod (affinity, cgroup, environment, the CNI
// plugin's device info), `kubectl fstack render` from its flags (--cpus, --pci, --vhost, --addr).
// One function per fact keeps what the CLI refuses what the dataplane refuses, in its words.

// DataplaneCPUCount is the number of exclusive CPUs the dataplane container needs for processes
// F-Stack processes, lcoresPerCPU of them sharing each (spec.dpdk.lcoresPerCPU; 1 in production).
func DataplaneCPUCount(processes, lcoresPerCPU int) int {
	lcoresPerCPU = max(lcoresPerCPU, 1)
	return (processes + lcoresPerCPU - 1) / lcoresPerCPU
}

// CheckDataplaneCPUs says whether the dataplane container's CPUs can run processes F-Stack
// processes, one exclusive CPU each, or lcoresPerCPU each (lab only).
func CheckDataplaneCPUs(cpus []int, processes, lcoresPerCPU int) error {
	need := DataplaneCPUCount(processes, lcoresPerCPU)
	if len(cpus) >= need {
		return nil
	}
	shared := ""
	if lcoresPerCPU > 1 {
		shared = fmt.Sprintf(" (%d processes per CPU, spec.dpdk.lcoresPerCPU)", lcoresPerCPU)
	}
	return fmt.Errorf("the dataplane container has CPUs %s but the StackInstance asks for %d processes%s; "+
		"kubelet's static CPU manager must give it %d exclusive CPUs (Guaranteed pod, integer cpu), or lower spec.processes",
		FormatCPUList(cpus), processes, shared, need)
}

// ParsePCIDevices parses the PCI addresses of a device-plugin resource as the SR-IOV device
// plugin lists them in PCIDEVICE_<RESOURCE>: comma-separated, blanks ignored, each
// [domain:]bus:device.function. The result is in the list's order, each address as DPDK names it.
func ParsePCIDevices(list string) ([]string, error) {
	var out []string
	for _, bdf := range strings.Split(list, ",") {
		if bdf = strings.TrimSpace(bdf); bdf == "" {
			continue
		}
		norm, ok := normalizeBDF(bdf)
		if !ok {
			return nil, fmt.Errorf("%q is not a PCI address: want domain:bus:device.function, e.g. 0000:3b:02.0", shorten(bdf))
		}
		out = append(out, norm)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no PCI address in %q", shorten(list))
	}
	return out, nil
}

// AttachmentOf is what the renderer uses of an attachment's device info (written by fstack-cni),
// checked: the device info's own rules (podcontract) and the addresses IPAM gave it.
func AttachmentOf(info *podcontract.DevInfo) (Attachment, error) {
	if err := info.Validate(); err != nil {
		return Attachment{}, err
	}
	var gws []string
	if info.Gateway != "" {
		gws = []string{info.Gateway}
	}
	if err := CheckAttachmentAddrs(info.IPs, gws); err != nil {
		return Attachment{}, err
	}
	return Attachment{SocketPath: info.VhostUser.Path, Server: info.VhostUser.Mode == podcontract.VhostUserModeServer,
		MAC: info.MAC, IPs: info.IPs, Gateways: gws, SwitchCPUs: info.SwitchCPUs}, nil
}

// CheckAttachmentAddrs checks the addresses IPAM gave an attachment: each an address with its
// prefix length, each gateway an address.
func CheckAttachmentAddrs(ips, gateways []string) error {
	for _, ip := range ips {
		if _, err := netip.ParsePrefix(ip); err != nil {
			return fmt.Errorf("attachment address %q is not an IP address with its prefix length, e.g. 10.1.0.5/24", shorten(ip))
		}
	}
	for _, gw := range gateways {
		if _, err := netip.ParseAddr(gw); err != nil {
			return fmt.Errorf("attachment gateway %q is not an IP address", shorten(gw))
		}
	}
	return nil
}
