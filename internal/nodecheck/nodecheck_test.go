package nodecheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// fakeOVS stands in for OVSDB (the real one is checked by the e2e suite on the local cluster's
// OVS-DPDK).
type fakeOVS struct {
	datapath string
	found    bool
	err      error
	facts    BridgeFacts
}

func (f *fakeOVS) BridgeDatapath(context.Context, string) (string, bool, error) {
	return f.datapath, f.found, f.err
}

func (f *fakeOVS) BridgeFacts(context.Context, string) (*BridgeFacts, error) {
	facts := f.facts
	return &facts, f.err
}

// fakeLinks stands in for the kernel's interface list (KernelLinks is checked against the real
// kernel in links_linux_test.go).
type fakeLinks struct {
	links []Link
	err   error
}

func (f *fakeLinks) Links() ([]Link, error) { return f.links, f.err }

// node is a fit node laid out in temp dirs, as the agent's mounts show the host.
type node struct {
	cfg   Config
	ovs   *fakeOVS
	links *fakeLinks
	base  string
}

func newNode(t *testing.T) *node {
	t.Helper()
	base := t.TempDir()
	n := &node{base: base, ovs: &fakeOVS{datapath: "netdev", found: true, facts: BridgeFacts{
		DPDKInitialized: true, DPDKInit: "true", PMDCPUMask: "0x1",
		Uplinks: []Uplink{{Name: "dpdk0", Type: "dpdk", LinkState: "up", AdminState: "up"}},
	}}, links: &fakeLinks{}}
	n.cfg = Config{
		Root: filepath.Join(base, "root"), KubeletDir: filepath.Join(base, "kubelet"),
		SocketRootParent: filepath.Join(base, "run"), SocketRootName: "vhost", Bridge: "br-fstack", OVS: n.ovs, Links: n.links,
		SeccompDir: filepath.Join(base, "seccomp"), SeccompProfile: []byte(`{"defaultAction":"SCMP_ACT_ERRNO"}`),
		Allocatable: corev1.ResourceList{"hugepages-2Mi": resource.MustParse("1Gi"), "hugepages-1Gi": resource.MustParse("2Gi"),
			corev1.ResourceCPU: resource.MustParse("3900m")},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
	}
	n.write(t, "root/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512\n")
	n.write(t, "root/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "300\n")
	n.write(t, "root/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "2\n")
	n.write(t, "root/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages", "2\n")
	n.write(t, "root/sys/fs/cgroup/cgroup.controllers", "cpuset cpu memory hugetlb\n")
	n.write(t, "root/proc/sys/kernel/randomize_va_space", "0\n")
	n.mkdir(t, "root/sys/kernel/iommu_groups/0")
	n.mkdir(t, "root/sys/module/vfio_pci")
	n.write(t, "kubelet/cpu_manager_state", `{"policyName":"static","defaultCpuSet":"0,2-3","entries":{"uid-a":{"app":"1"}},"checksum":1}`)
	n.mkdir(t, "run/vhost")
	n.write(t, "seccomp/"+podcontract.SeccompProfileFile, `{"defaultAction":"SCMP_ACT_ERRNO"}`)
	return n
}

func (n *node) write(t *testing.T, rel, data string) {
	t.Helper()
	p := filepath.Join(n.base, rel)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(data), 0o644))
}

func (n *node) mkdir(t *testing.T, rel string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(n.base, rel), 0o755))
}

func (n *node) remove(t *testing.T, rel string) {
	t.Helper()
	must(t, os.RemoveAll(filepath.Join(n.base, rel)))
}

// symlink replaces rel with a symlink to a copy of it outside every root, so a check that
// followed it would see the same, fit content.
func (n *node) symlink(t *testing.T, rel string) {
	t.Helper()
	p := filepath.Join(n.base, rel)
	outside := filepath.Join(t.TempDir(), "target")
	must(t, os.Rename(p, outside))
	must(t, os.Symlink(outside, p))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func check(t *testing.T, r *Report, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Checks)
	return Check{}
}

func TestFitNodePassesWithEveryLabel(t *testing.T) {
	r := Run(context.Background(), &newNode(t).cfg)
	if f := r.Failed(); len(f) != 0 {
		t.Fatalf("failed checks on a fit node: %+v", f)
	}
	want := map[string]string{
		fsv1.NodeLabelHugePages("2Mi"): "ready", fsv1.NodeLabelHugePages("1Gi"): "ready",
		fsv1.NodeLabelVhostUser: "ready", fsv1.NodeLabelVFIO: "ready", fsv1.NodeLabelCPUManager: "static",
		fsv1.NodeLabelCgroup: "v2", fsv1.NodeLabelASLR: "off", fsv1.NodeLabelSeccomp: "ready",
	}
	if len(r.Labels) != len(want) {
		t.Errorf("labels %v, want %v", r.Labels, want)
	}
	for k, v := range want {
		if r.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, r.Labels[k], v)
		}
		if len(k) > len(fsv1.NodeLabelPrefix)+63 {
			t.Errorf("label key %s: name part longer than 63", k)
		}
	}
	if c := check(t, r, "hugepages-2Mi"); c.Detail != "512 total, 300 free, 512 allocatable" {
		t.Errorf("hugepages-2Mi detail %q", c.Detail)
	}
	back, err := ParseReport(r.Marshal())
	if err != nil || len(back.Checks) != len(r.Checks) || back.Labels[fsv1.NodeLabelVhostUser] != "ready" {
		t.Errorf("report does not round-trip: %v %+v", err, back)
	}
}

// Each broken fact fails its check with a fix, and takes away its label (and only that one).
func TestBrokenNodeLosesTheLabel(t *testing.T) {
	cases := []struct {
		name, check, label, fix string
		status                  Status
		breakIt                 func(*testing.T, *node)
	}{
		{"no 1G pages", "hugepages-1Gi", fsv1.NodeLabelHugePages("1Gi"), "hugepagesz=1G hugepages=N", Fail,
			func(t *testing.T, n *node) {
				n.write(t, "root/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "0")
			}},
		{"no free 2M pages", "hugepages-2Mi", fsv1.NodeLabelHugePages("2Mi"), "every page is in use", Fail,
			func(t *testing.T, n *node) {
				n.write(t, "root/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "0")
			}},
		{"kubelet does not report 2M pages", "hugepages-2Mi", fsv1.NodeLabelHugePages("2Mi"), "restart the kubelet", Fail,
			func(_ *testing.T, n *node) { delete(n.cfg.Allocatable, "hugepages-2Mi") }},
		{"cpu manager none", "cpu-manager", fsv1.NodeLabelCPUManager, "cpuManagerPolicy: static", Fail,
			func(t *testing.T, n *node) { n.write(t, "kubelet/cpu_manager_state", `{"policyName":"none"}`) }},
		{"no cpu manager state", "cpu-manager", fsv1.NodeLabelCPUManager, "cpuManagerPolicy: static", Fail,
			func(t *testing.T, n *node) { n.remove(t, "kubelet/cpu_manager_state") }},
		{"OVSDB down", "ovsdb", fsv1.NodeLabelVhostUser, "start OVS-DPDK", Fail,
			func(_ *testing.T, n *node) { n.ovs.err = errors.New("connection refused") }},
		{"no bridge", "ovs-bridge", fsv1.NodeLabelVhostUser, "ovs-vsctl add-br br-fstack", Fail,
			func(_ *testing.T, n *node) { n.ovs.found = false }},
		{"system bridge", "ovs-bridge", fsv1.NodeLabelVhostUser, "datapath_type=netdev", Fail,
			func(_ *testing.T, n *node) { n.ovs.datapath = "system" }},
		{"OVS without DPDK", "ovs-dpdk-init", fsv1.NodeLabelVhostUser, "other_config:dpdk-init=true, then restart ovs-vswitchd", Fail,
			func(_ *testing.T, n *node) { n.ovs.facts.DPDKInitialized, n.ovs.facts.DPDKInit = false, "" }},
		{"uplink down", "ovs-uplink", fsv1.NodeLabelVhostUser, "ip link set <name> up", Fail,
			func(_ *testing.T, n *node) { n.ovs.facts.Uplinks[0].LinkState = "down" }},
		{"PMD on an exclusive CPU", "ovs-pmd-cpus", fsv1.NodeLabelVhostUser, `reservedSystemCPUs: "0-1"`, Fail,
			func(_ *testing.T, n *node) { n.ovs.facts.PMDCPUMask = "0x2" }},
		{"PMD mask not a mask", "ovs-pmd-cpus", fsv1.NodeLabelVhostUser, "pmd-cpu-mask=0x1", Fail,
			func(_ *testing.T, n *node) { n.ovs.facts.PMDCPUMask = "0xz" }},
		{"no socket root", "socket-root", fsv1.NodeLabelVhostUser, "mkdir", Fail,
			func(t *testing.T, n *node) { n.remove(t, "run/vhost") }},
		{"socket root a file", "socket-root", fsv1.NodeLabelVhostUser, "directory", Fail,
			func(t *testing.T, n *node) { n.remove(t, "run/vhost"); n.write(t, "run/vhost", "") }},
		{"no IOMMU", "vfio", fsv1.NodeLabelVFIO, "intel_iommu=on", Fail,
			func(t *testing.T, n *node) { n.remove(t, "root/sys/kernel/iommu_groups/0") }},
		{"no vfio-pci", "vfio", fsv1.NodeLabelVFIO, "modprobe vfio-pci", Fail,
			func(t *testing.T, n *node) { n.remove(t, "root/sys/module/vfio_pci") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			tc.breakIt(t, n)
			r := Run(context.Background(), &n.cfg)
			c := check(t, r, tc.check)
			if c.Status != tc.status || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("check %s = %+v, want %s with a fix naming %q", tc.check, c, tc.status, tc.fix)
			}
			if _, ok := r.Labels[tc.label]; ok {
				t.Errorf("label %s still set: %v", tc.label, r.Labels)
			}
			if len(r.Labels) != 7 {
				t.Errorf("one label should go, the other seven stay: %v", r.Labels)
			}
		})
	}
}

func TestInformationalChecks(t *testing.T) {
	n := newNode(t)
	n.write(t, "root/proc/sys/kernel/randomize_va_space", "2\n")
	n.remove(t, "root/sys/fs/cgroup/cgroup.controllers")
	r := Run(context.Background(), &n.cfg)
	if c := check(t, r, "aslr"); c.Status != Warn || !strings.Contains(c.Fix, "randomize_va_space=0") {
		t.Errorf("aslr = %+v", c)
	}
	if r.Labels[fsv1.NodeLabelASLR] != "on" || r.Labels[fsv1.NodeLabelCgroup] != "v1" {
		t.Errorf("labels %v, want aslr=on cgroup=v1", r.Labels)
	}
	if r.Labels[fsv1.NodeLabelVhostUser] != "ready" {
		t.Errorf("a warning took away a readiness label: %v", r.Labels)
	}
}

// Whatever is planted beneath a root is judged as found, never followed: a symlink to a copy of
// the fit content outside the root still fails, and a FIFO does not hang the agent.
func TestSymlinksAndSpecialFilesAreNotFollowed(t *testing.T) {
	cases := []struct {
		check string
		plant func(*testing.T, *node)
	}{
		{"cpu-manager", func(t *testing.T, n *node) { n.symlink(t, "kubelet/cpu_manager_state") }},
		{"cpu-manager", func(t *testing.T, n *node) {
			n.remove(t, "kubelet/cpu_manager_state")
			must(t, unix.Mkfifo(filepath.Join(n.base, "kubelet/cpu_manager_state"), 0o644))
		}},
		{"socket-root", func(t *testing.T, n *node) { n.symlink(t, "run/vhost") }},
		{"hugepages-2Mi", func(t *testing.T, n *node) {
			n.symlink(t, "root/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
		}},
		{"hugepages", func(t *testing.T, n *node) { n.symlink(t, "root/sys/kernel/mm") }},
		{"vfio", func(t *testing.T, n *node) { n.symlink(t, "root/sys/module/vfio_pci") }},
	}
	for _, tc := range cases {
		t.Run(tc.check, func(t *testing.T) {
			n := newNode(t)
			tc.plant(t, n)
			if c := check(t, Run(context.Background(), &n.cfg), tc.check); c.Status != Fail {
				t.Errorf("%s followed what was planted: %+v", tc.check, c)
			}
		})
	}
}
