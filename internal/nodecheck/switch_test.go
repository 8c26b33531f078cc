package nodecheck

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// A bridge with no uplink at all warns with the words the docs use and keeps the node ready:
// pods on the node still reach its stacks.
func TestNoUplinkWarnsAndKeepsTheLabel(t *testing.T) {
	n := newNode(t)
	n.ovs.facts.Uplinks = nil
	r := Run(context.Background(), &n.cfg)
	c := check(t, r, "ovs-uplink")
	if c.Status != Warn || !strings.HasPrefix(c.Detail, "no uplink: only pods on this node can reach the stack") ||
		!strings.Contains(c.Fix, "type=dpdk options:dpdk-devargs=") {
		t.Errorf("ovs-uplink = %+v, want a warning that only this node's pods can reach the stack, with a fix", c)
	}
	if r.Labels[fsv1.NodeLabelVhostUser] != fsv1.NodeReady {
		t.Errorf("no uplink took the vhost-user label away: %v", r.Labels)
	}
}

func TestUplink(t *testing.T) {
	up := Uplink{Name: "dpdk0", Type: "dpdk", LinkState: "up", AdminState: "up"}
	cases := []struct {
		name    string
		uplinks []Uplink
		status  Status
		detail  string
	}{
		{"one up", []Uplink{up}, Pass, "up: dpdk0 (dpdk)"},
		{"one up one down", []Uplink{up, {Name: "eth1", LinkState: "down", AdminState: "down"}}, Pass,
			"up: dpdk0 (dpdk); down: eth1 (system, link down, admin down)"},
		{"down", []Uplink{{Name: "eth1", LinkState: "down", AdminState: "up"}}, Fail,
			"no uplink is up, down: eth1 (system, link down): only pods on this node can reach the stack"},
		// OVS reads a patch port whose peer is missing as link up, with an error.
		{"patch without peer", []Uplink{{Name: "to-int", Type: "patch", LinkState: "up", AdminState: "up", Error: "No usable peer 'x' exists in 'netdev' datapath."}}, Fail,
			"down: to-int (patch, link up: No usable peer 'x' exists in 'netdev' datapath.)"},
		{"dpdk port that failed", []Uplink{{Name: "dpdk1", Type: "dpdk", Error: "could not open network device dpdk1"}}, Fail,
			"dpdk1 (dpdk, link unreported: could not open network device dpdk1)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := uplink(&BridgeFacts{Uplinks: tc.uplinks}, "br-fstack")
			if c.Status != tc.status || !strings.Contains(c.Detail, tc.detail) || (tc.status == Fail) != (c.Fix != "") {
				t.Errorf("uplink = %+v, want %s with detail %q and a fix only on failure", c, tc.status, tc.detail)
			}
		})
	}
	for typ, want := range map[string]bool{"": true, "system": true, "dpdk": true, "patch": true, "vxlan": true, "geneve": true,
		"internal": false, "dpdkvhostuserclient": false, "dpdkvhostuser": false} {
		if isUplinkType(typ) != want {
			t.Errorf("isUplinkType(%q) = %v, want %v", typ, !want, want)
		}
	}
}

func TestDPDKInit(t *testing.T) {
	if c := dpdkInit(&BridgeFacts{DPDKInitialized: true, DPDKInit: "true"}); c.Status != Pass || c.Detail != "dpdk_initialized=true (other_config:dpdk-init=true)" {
		t.Errorf("initialized: %+v", c)
	}
	c := dpdkInit(&BridgeFacts{DPDKInit: "true"})
	if c.Status != Fail || !strings.Contains(c.Detail, "dpdk_initialized=false (other_config:dpdk-init=true)") || !strings.Contains(c.Fix, "ovs-vswitchd's log") {
		t.Errorf("set but not initialized: %+v, want a failure pointing at ovs-vswitchd's log", c)
	}
	if c := dpdkInit(&BridgeFacts{}); !strings.Contains(c.Detail, "other_config:dpdk-init unset") {
		t.Errorf("unset: %+v", c)
	}
}

// OVSDB down: the switch checks fail as not checked, so readiness is never claimed unchecked.
func TestSwitchChecksWithoutOVSDB(t *testing.T) {
	n := newNode(t)
	n.ovs.err = fmt.Errorf("connection refused")
	r := Run(context.Background(), &n.cfg)
	for _, name := range []string{"ovs-dpdk-init", "ovs-uplink", "ovs-pmd-cpus"} {
		if c := check(t, r, name); c.Status != Fail || !strings.HasPrefix(c.Detail, "not checked") {
			t.Errorf("%s = %+v, want a failure saying not checked", name, c)
		}
	}
	n.ovs.err, n.ovs.found = nil, false
	r = Run(context.Background(), &n.cfg)
	if c := check(t, r, "ovs-dpdk-init"); c.Status != Pass {
		t.Errorf("without the bridge OVS's DPDK is still checked: %+v", c)
	}
	if c := check(t, r, "ovs-uplink"); c.Status != Fail || c.Detail != "not checked: no bridge to check" {
		t.Errorf("ovs-uplink without the bridge: %+v", c)
	}
}

// pmdNode is newNode with the CPUs, checkpoint and PMD mask given.
func pmdNode(t *testing.T, capacity, allocatable, state, mask string) *node {
	n := newNode(t)
	n.cfg.Capacity[corev1.ResourceCPU] = resource.MustParse(capacity)
	n.cfg.Allocatable[corev1.ResourceCPU] = resource.MustParse(allocatable)
	n.write(t, "kubelet/cpu_manager_state", state)
	n.ovs.facts.PMDCPUMask = mask
	return n
}

func TestPMDCPUs(t *testing.T) {
	const static4 = `{"policyName":"static","defaultCpuSet":"0,2-3","entries":{"uid-a":{"app":"1"}},"checksum":1}`
	cases := []struct {
		name                   string
		capacity, alloc, state string
		mask, reserved         string
		prep                   func(*testing.T, *node)
		status                 Status
		detail, fix            string
	}{
		{name: "on the kubelet's reserved CPU", capacity: "4", alloc: "3900m", state: static4, mask: "0x1", status: Pass,
			detail: "PMD CPUs 0 (pmd-cpu-mask=0x1), all outside the kubelet's exclusive pool (reserved CPUs 0: 1 CPU(s) for kubeReserved+systemReserved 100m"},
		{name: "on a CPU a pod holds", capacity: "4", alloc: "3900m", state: static4, mask: "0x2", status: Fail,
			detail: "CPU 1 can be given exclusively to a Guaranteed pod (reserved CPUs 0: 1 CPU(s)",
			fix:    `reservedSystemCPUs: "0-1"`},
		{name: "names the holder", capacity: "4", alloc: "3900m", state: static4, mask: "0x6", status: Fail,
			detail: "CPU 1-2 can be given exclusively to a Guaranteed pod (reserved CPUs 0: 1 CPU(s) for kubeReserved+systemReserved 100m, the kubelet's own pick from the lowest-numbered cores (if the kubelet has reservedSystemCPUs, set the chart value cni.nodeAgent.kubeletReservedCPUs to them)); per the kubelet's checkpoint as the agent read it, CPU 1 is exclusively pod UID uid-a container app's",
			fix:    "pmd-cpu-mask=0x1"},
		{name: "two reserved CPUs", capacity: "4", alloc: "2500m", state: static4, mask: "0x2", status: Pass,
			detail: "reserved CPUs 0-1"},
		{name: "reservedSystemCPUs given", capacity: "4", alloc: "2", state: static4, mask: "0xc", reserved: "2-3", status: Pass,
			detail: "reserved CPUs 2-3: the kubelet's reservedSystemCPUs as given to the node agent"},
		{name: "reservedSystemCPUs given, PMD outside", capacity: "4", alloc: "2", state: static4, mask: "0x3", reserved: "2-3", status: Fail,
			detail: "CPU 0-1 can be given exclusively", fix: `reservedSystemCPUs: "0-3"`},
		{name: "reservedSystemCPUs not a list", capacity: "4", alloc: "2", state: static4, mask: "0x1", reserved: "two", status: Fail,
			detail: "--kubelet-reserved-cpus \"two\" (chart value cni.nodeAgent.kubeletReservedCPUs) is not a CPU list", fix: "cni.nodeAgent.kubeletReservedCPUs"},
		{name: "policy none", capacity: "4", alloc: "3900m", state: `{"policyName":"none","defaultCpuSet":"","checksum":1}`, mask: "0x2", status: Pass,
			detail: "PMD CPUs 1 (pmd-cpu-mask=0x2); CPU manager policy none: the kubelet hands out no exclusive CPUs"},
		{name: "mask unset, one NUMA node", capacity: "4", alloc: "3900m", state: static4, status: Pass,
			prep:   func(t *testing.T, n *node) { n.write(t, "root/sys/devices/system/node/node0/cpulist", "0-3\n") },
			detail: "pmd-cpu-mask unset: OVS puts one PMD on the first core of each NUMA node, CPU 0, all outside"},
		{name: "mask unset, two NUMA nodes", capacity: "4", alloc: "3900m", state: static4, status: Fail,
			prep: func(t *testing.T, n *node) {
				n.write(t, "root/sys/devices/system/node/node0/cpulist", "0-1\n")
				n.write(t, "root/sys/devices/system/node/node1/cpulist", "2-3\n")
			},
			detail: "pmd-cpu-mask unset: OVS puts one PMD on the first core of each NUMA node, CPU 0,2; CPU 2 can be given exclusively",
			fix:    "pmd-cpu-mask=0x1"},
		// With hyperthreads the kubelet reserves whole cores: CPU 0 and its sibling 2.
		{name: "whole cores first", capacity: "4", alloc: "2", state: static4, mask: "0x4", status: Pass,
			prep: func(t *testing.T, n *node) {
				for cpu, sib := range map[int]string{0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"} {
					n.write(t, fmt.Sprintf("root/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu), sib)
				}
			},
			detail: "reserved CPUs 0,2:"},
		{name: "no checkpoint", capacity: "4", alloc: "3900m", state: static4, mask: "0x1", status: Warn,
			prep:   func(t *testing.T, n *node) { n.remove(t, "kubelet/cpu_manager_state") },
			detail: "cannot tell whether the kubelet may hand those CPUs out"},
		{name: "checkpoint out of bounds", capacity: "4", alloc: "3900m", state: `{"policyName":"static","defaultCpuSet":"0-2000000000"}`, mask: "0x1", status: Fail,
			detail: "defaultCpuSet: CPU 2000000000 is above 8191"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := pmdNode(t, tc.capacity, tc.alloc, tc.state, tc.mask)
			n.cfg.KubeletReservedCPUs = tc.reserved
			if tc.prep != nil {
				tc.prep(t, n)
			}
			r := Run(context.Background(), &n.cfg)
			c := check(t, r, "ovs-pmd-cpus")
			if c.Status != tc.status || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("ovs-pmd-cpus = %+v\nwant %s with detail %q and fix %q", c, tc.status, tc.detail, tc.fix)
			}
			if _, ready := r.Labels[fsv1.NodeLabelVhostUser]; ready != (tc.status != Fail) {
				t.Errorf("vhost-user label %v with the check %s", ready, c.Status)
			}
		})
	}
}

func TestTakeLowest(t *testing.T) {
	// Two sockets of two cores of two threads: socket 0 has CPUs 0-1 and 4-5 (siblings 0,4 and 1,5).
	var cpus []topoCPU
	for cpu := range 8 {
		cpus = append(cpus, topoCPU{cpu: cpu, socket: cpu % 4 / 2, core: cpu % 4})
	}
	for n, want := range map[int]string{1: "0", 2: "0,4", 3: "0-1,4", 4: "0-1,4-5", 5: "0-2,4-5", 6: "0-2,4-6"} {
		if got := takeLowest(append([]topoCPU(nil), cpus...), n).String(); got != want {
			t.Errorf("takeLowest(%d) = %s, want %s", n, got, want)
		}
	}
}
