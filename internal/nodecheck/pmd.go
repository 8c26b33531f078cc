package nodecheck

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// OVS's PMD threads busy-poll their CPUs at 100%. Under the CPU manager's static policy the
// kubelet hands a Guaranteed pod's integer-CPU containers CPUs of their own, taken from every CPU
// but the reserved ones; a PMD on such a CPU halves the pod's "exclusive" CPU (a dataplane lcore
// there loses half its packets' time) and the PMD's own. So the PMD CPUs must be reserved.
//
// What the agent sees: the checkpoint (policy, defaultCpuSet, entries: their union is every CPU
// the kubelet manages, and an entry's CPUs are exclusively someone's now); the Node's capacity and
// allocatable (the kubelet reserves ceil(capacity - allocatable) CPUs). Which CPUs the kubelet
// reserved is in no file the agent can read: reservedSystemCPUs when the platform set it (given to
// the agent as Config.KubeletReservedCPUs), else the kubelet's own pick, which this reproduces:
// whole sockets, then whole cores, then single CPUs, lowest-numbered first (the kubelet's
// takeByTopology with every CPU free; NUMA nodes smaller than a socket are not modelled).

// checkpoint is the part of the kubelet's cpu_manager_state the checks read.
type checkpoint struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries"`
}

// kubeletDirError: the kubelet's dir itself could not be opened (a mount is missing).
type kubeletDirError struct{ err error }

func (e *kubeletDirError) Error() string { return errDetail("kubelet dir", e.err) }
func (e *kubeletDirError) Unwrap() error { return e.err }

func readCheckpoint(kubeletDir string) (*checkpoint, error) {
	d, err := fsutil.OpenDir(kubeletDir)
	if err != nil {
		return nil, &kubeletDirError{err}
	}
	defer d.Close()
	raw, err := d.ReadFile("cpu_manager_state", readLimit)
	if err != nil {
		return nil, fmt.Errorf("cpu_manager_state: %w", err)
	}
	var st checkpoint
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("cpu_manager_state: %w", err)
	}
	return &st, nil
}

// parseCPUs parses a kernel CPU list, refusing numbers above podcontract.MaxCPU before expanding
// a range (cpuset.Parse would build "0-2000000000" one CPU at a time).
func parseCPUs(s string) (cpuset.CPUSet, error) {
	for _, n := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '-' }) {
		if c, err := strconv.Atoi(strings.TrimSpace(n)); err == nil && c > podcontract.MaxCPU {
			return cpuset.New(), fmt.Errorf("CPU %d is above %d, the highest CPU number Linux has", c, podcontract.MaxCPU)
		}
	}
	return cpuset.Parse(strings.TrimSpace(s))
}

// CheckCPUList says why s is not a kernel CPU list ("0-1,4"); "" is a valid, empty list.
func CheckCPUList(s string) error {
	_, err := parseCPUs(s)
	return err
}

// pmdCPUs judges the PMD CPUs against the kubelet's exclusive pool; root may be nil (no topology).
func pmdCPUs(root *fsutil.Dir, cfg *Config, facts *BridgeFacts) Check {
	c := Check{Name: "ovs-pmd-cpus", Status: Fail, Label: fsv1.NodeLabelVhostUser}
	pmd, pmdFrom, err := pmdSet(root, facts.PMDCPUMask)
	if err != nil {
		c.Detail = fmt.Sprintf("other_config:pmd-cpu-mask %q is not a CPU mask: %v", facts.PMDCPUMask, err)
		c.Fix = "set a hex mask of reserved CPUs: ovs-vsctl set Open_vSwitch . other_config:pmd-cpu-mask=0x1 (CPU 0)"
		return c
	}
	st, err := readCheckpoint(cfg.KubeletDir)
	if err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("%s; cannot tell whether the kubelet may hand those CPUs out: %v", pmdFrom, err)
		c.Fix = "the node agent reads the kubelet's CPU manager checkpoint (chart value kubeletRootDir); see the cpu-manager check"
		return c
	}
	switch st.PolicyName {
	case "none":
		c.Status, c.Detail = Pass, pmdFrom+"; CPU manager policy none: the kubelet hands out no exclusive CPUs"
		return c
	case fsv1.NodeCPUManagerStatic:
	default:
		c.Status, c.Detail = Warn, fmt.Sprintf("%s; CPU manager policy %q, which this check does not know", pmdFrom, st.PolicyName)
		return c
	}
	all, holders, err := managedCPUs(st)
	if err != nil {
		c.Detail, c.Fix = errDetail("cpu_manager_state", err), "remove /var/lib/kubelet/cpu_manager_state and restart the kubelet"
		return c
	}
	reserved, reservedFrom, err := kubeletReserved(root, cfg, all)
	if err != nil {
		c.Detail = fmt.Sprintf("%s; the kubelet's reserved CPUs: %v", pmdFrom, err)
		c.Fix = "give the node agent the kubelet's reservedSystemCPUs as a CPU list like 0-1 (chart value cni.nodeAgent.kubeletReservedCPUs)"
		return c
	}
	exclusive := all.Difference(reserved)
	bad := pmd.Intersection(exclusive)
	if bad.IsEmpty() {
		c.Status = Pass
		c.Detail = fmt.Sprintf("%s, all outside the kubelet's exclusive pool (reserved CPUs %s: %s)", pmdFrom, cpuList(reserved), reservedFrom)
		return c
	}
	c.Detail = fmt.Sprintf("%s; CPU %s can be given exclusively to a Guaranteed pod (reserved CPUs %s: %s)%s",
		pmdFrom, bad.String(), cpuList(reserved), reservedFrom, heldBy(bad, holders))
	want := reserved.Union(bad)
	c.Fix = fmt.Sprintf("reserve the PMD CPUs: reservedSystemCPUs: \"%s\" in the kubelet's configuration (then remove "+
		"/var/lib/kubelet/cpu_manager_state, restart the kubelet, and set the chart value cni.nodeAgent.kubeletReservedCPUs to the same list), "+
		"or move the PMDs onto reserved CPUs: ovs-vsctl set Open_vSwitch . other_config:pmd-cpu-mask=%s; docs/cpu-and-numa.md",
		want.String(), podcontract.FormatCPUMask(reserved.List()))
	if reserved.IsEmpty() {
		c.Fix = fmt.Sprintf("reserve the PMD CPUs: reservedSystemCPUs: \"%s\" in the kubelet's configuration (then remove "+
			"/var/lib/kubelet/cpu_manager_state and restart the kubelet); docs/cpu-and-numa.md", want.String())
	}
	return c
}

// pmdSet is the PMD CPUs and how they were found. With no pmd-cpu-mask OVS makes one PMD per
// NUMA node, on that node's first core it may use: the first CPU of each node here (ovs-vswitchd's
// own affinity, which could skip some, is not visible to the agent).
func pmdSet(root *fsutil.Dir, mask string) (cpuset.CPUSet, string, error) {
	if mask != "" {
		cpus, err := podcontract.ParseCPUMask(mask)
		if err != nil {
			return cpuset.New(), "", err
		}
		set := cpuset.New(cpus...)
		return set, fmt.Sprintf("PMD CPUs %s (pmd-cpu-mask=%s)", cpuList(set), mask), nil
	}
	firsts := numaFirstCPUs(root)
	return firsts, fmt.Sprintf("pmd-cpu-mask unset: OVS puts one PMD on the first core of each NUMA node, CPU %s", firsts.String()), nil
}

// numaFirstCPUs is the lowest CPU of each NUMA node in sysfs; CPU 0 when sysfs shows none.
func numaFirstCPUs(root *fsutil.Dir) cpuset.CPUSet {
	var firsts []int
	if root != nil {
		if d, err := root.OpenDir("sys/devices/system/node"); err == nil {
			names, _ := d.Names()
			for _, n := range names {
				if !strings.HasPrefix(n, "node") {
					continue
				}
				if _, err := strconv.Atoi(n[len("node"):]); err != nil {
					continue
				}
				list, err := readTrimmed(d, n+"/cpulist")
				if err != nil {
					continue
				}
				if set, err := parseCPUs(list); err == nil && set.Size() > 0 {
					firsts = append(firsts, set.List()[0])
				}
			}
			d.Close()
		}
	}
	if len(firsts) == 0 {
		firsts = []int{0}
	}
	return cpuset.New(firsts...)
}

// managedCPUs is every CPU the static policy manages (the shared pool and every assignment:
// the kubelet keeps their union equal to its CPUs) and who holds each assigned one.
func managedCPUs(st *checkpoint) (cpuset.CPUSet, map[int]string, error) {
	all, err := parseCPUs(st.DefaultCPUSet)
	if err != nil {
		return all, nil, fmt.Errorf("defaultCpuSet: %w", err)
	}
	holders := map[int]string{}
	for pod, containers := range st.Entries {
		for name, list := range containers {
			set, err := parseCPUs(list)
			if err != nil {
				return all, nil, fmt.Errorf("entries[%s][%s]: %w", pod, name, err)
			}
			all = all.Union(set)
			for _, cpu := range set.UnsortedList() {
				holders[cpu] = fmt.Sprintf("pod UID %s container %s", pod, name)
			}
		}
	}
	return all, holders, nil
}

// heldBy names who the checkpoint says holds any of cpus now, e.g. "; CPU 1 is pod UID x's".
func heldBy(cpus cpuset.CPUSet, holders map[int]string) string {
	var held []string
	for _, cpu := range cpus.List() {
		if h, ok := holders[cpu]; ok {
			held = append(held, fmt.Sprintf("CPU %d is exclusively %s's", cpu, h))
		}
	}
	if len(held) == 0 {
		return ""
	}
	return "; per the kubelet's checkpoint as the agent read it, " + strings.Join(held, ", ")
}

// kubeletReserved is the kubelet's reserved CPUs and where that came from.
func kubeletReserved(root *fsutil.Dir, cfg *Config, all cpuset.CPUSet) (cpuset.CPUSet, string, error) {
	if cfg.KubeletReservedCPUs != "" {
		set, err := parseCPUs(cfg.KubeletReservedCPUs)
		if err != nil {
			return set, "", fmt.Errorf("the node agent's --kubelet-reserved-cpus %q (chart value cni.nodeAgent.kubeletReservedCPUs) is not a CPU list like 0-1: %w", cfg.KubeletReservedCPUs, err)
		}
		return set, "the kubelet's reservedSystemCPUs as given to the node agent", nil
	}
	capCPU, okCap := cfg.Capacity[corev1.ResourceCPU]
	allocCPU, okAlloc := cfg.Allocatable[corev1.ResourceCPU]
	if !okCap || !okAlloc {
		return cpuset.New(), "", fmt.Errorf("the Node reports no cpu capacity and allocatable to count them from")
	}
	milli := capCPU.MilliValue() - allocCPU.MilliValue()
	n := int((milli + 999) / 1000)
	if n <= 0 {
		return cpuset.New(), "the Node's capacity equals its allocatable: the kubelet reserves none", nil
	}
	return takeLowest(cpuTopology(root, all), n), fmt.Sprintf("%d CPU(s) for kubeReserved+systemReserved %dm, "+
		"the kubelet's own pick from the lowest-numbered cores (if the kubelet has reservedSystemCPUs, set the chart value "+
		"cni.nodeAgent.kubeletReservedCPUs to them)", n, milli), nil
}

// topoCPU is one CPU's place: its socket and its core (the core's lowest CPU, as the kubelet
// numbers cores).
type topoCPU struct{ cpu, socket, core int }

// cpuTopology reads each CPU's socket and core siblings from sysfs; a CPU sysfs does not describe
// is its own core on socket 0.
func cpuTopology(root *fsutil.Dir, all cpuset.CPUSet) []topoCPU {
	out := make([]topoCPU, 0, all.Size())
	for _, cpu := range all.List() {
		t := topoCPU{cpu: cpu, core: cpu}
		if root != nil {
			dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/", cpu)
			if v, err := readTrimmed(root, dir+"physical_package_id"); err == nil {
				t.socket, _ = strconv.Atoi(v)
			}
			if v, err := readTrimmed(root, dir+"thread_siblings_list"); err == nil {
				if sib, err := parseCPUs(v); err == nil && sib.Size() > 0 {
					t.core = sib.List()[0]
				}
			}
		}
		out = append(out, t)
	}
	return out
}

// takeLowest picks n CPUs as the kubelet's takeByTopology does from a node with every CPU free:
// whole sockets while n covers one, then whole cores, then single CPUs, lowest-numbered first.
func takeLowest(cpus []topoCPU, n int) cpuset.CPUSet {
	sort.Slice(cpus, func(a, b int) bool {
		x, y := cpus[a], cpus[b]
		if x.socket != y.socket {
			return x.socket < y.socket
		}
		if x.core != y.core {
			return x.core < y.core
		}
		return x.cpu < y.cpu
	})
	taken := map[int]bool{}
	group := func(key func(topoCPU) int) {
		var keys []int
		members := map[int][]int{}
		for _, c := range cpus {
			if !taken[c.cpu] {
				k := key(c)
				if _, seen := members[k]; !seen {
					keys = append(keys, k)
				}
				members[k] = append(members[k], c.cpu)
			}
		}
		for _, k := range keys {
			if len(members[k]) <= n {
				for _, cpu := range members[k] {
					taken[cpu] = true
				}
				n -= len(members[k])
			}
		}
	}
	group(func(c topoCPU) int { return c.socket })
	group(func(c topoCPU) int { return c.core })
	for _, c := range cpus {
		if n > 0 && !taken[c.cpu] {
			taken[c.cpu] = true
			n--
		}
	}
	out := make([]int, 0, len(taken))
	for cpu := range taken {
		out = append(out, cpu)
	}
	return cpuset.New(out...)
}

// cpuList is a set as the kernel writes it, "none" when empty.
func cpuList(s cpuset.CPUSet) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}
