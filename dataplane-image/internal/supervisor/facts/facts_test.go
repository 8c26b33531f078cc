package facts

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func TestGatherReadsEveryFact(t *testing.T) {
	spec := vhostSpec(2)
	h := newHarness(t, spec)
	h.writeDevinfo()
	h.env["PCIDEVICE_INTEL_COM_SRIOV_DPDK"] = "0000:3b:02.1, 0000:3b:02.0"
	h.cpus = []int{4, 5, 6}
	facts, err := h.facts().Gather(checked(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	// A stack's ports are all vhost-user or all PCI: the device plugin's functions in a stack of
	// their own.
	pci := vhostSpec(2)
	pci.Ports = []fsv1.PortSpec{{Name: "vf", Device: fsv1.PortDevice{PCI: &fsv1.PCIDevice{Resource: "intel.com/sriov_dpdk"}},
		Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "192.168.1.2/24", Gateway: "192.168.1.1"}}}}
	pciFacts, err := h.facts().Gather(checked(t, pci))
	if err != nil {
		t.Fatal(err)
	}
	facts.PCIResources = pciFacts.PCIResources
	// Two processes take two of the three CPUs (podcontract.PlaceLcores).
	if !reflect.DeepEqual(facts.DataplaneCPUs, []int{4, 5}) {
		t.Errorf("CPUs = %v", facts.DataplaneCPUs)
	}
	a := facts.Attachments["net1"]
	if a.SocketPath != "/var/run/kube-fstack/vhost/net1.sock" || !a.Server || a.MAC != "02:00:00:00:00:01" ||
		!reflect.DeepEqual(a.IPs, []string{"10.1.0.5/24"}) || !reflect.DeepEqual(a.Gateways, []string{"10.1.0.1"}) {
		t.Errorf("attachment = %+v", a)
	}
	if got := facts.PCIResources["intel.com/sriov_dpdk"]; !reflect.DeepEqual(got, []string{"0000:3b:02.1", "0000:3b:02.0"}) {
		t.Errorf("PCI = %v (the device plugin's order must be kept)", got)
	}
}

// Lab option spec.dpdk.lcoresPerCPU: two processes in a container of one CPU are accepted.
func TestGatherAcceptsOneCPUForTwoSharingLcores(t *testing.T) {
	spec := vhostSpec(2)
	spec.DPDK.LcoresPerCPU = 2
	h := newHarness(t, spec)
	h.writeDevinfo()
	h.cpus = []int{1}
	facts, err := h.facts().Gather(checked(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(facts.DataplaneCPUs, []int{1}) {
		t.Errorf("CPUs = %v", facts.DataplaneCPUs)
	}
}

func TestGatherNamesEachBadFact(t *testing.T) {
	cases := map[string]struct {
		mutate func(*harness, *fsv1.StackInstanceSpec)
		want   []string
	}{
		"too few CPUs": {func(h *harness, _ *fsv1.StackInstanceSpec) { h.cpus = []int{3} },
			[]string{"the dataplane container has CPUs 3 but the StackInstance asks for 2 processes; kubelet's static CPU manager must give it 2 exclusive CPUs (Guaranteed pod, integer cpu)"}},
		"too few CPUs for lcores sharing them": {func(h *harness, s *fsv1.StackInstanceSpec) {
			s.Processes, s.DPDK.LcoresPerCPU = 5, 2
			s.Ports[0].Device.VhostUser.Queues = 5
			h.cpus = []int{3, 4}
		}, []string{"the dataplane container has CPUs 3-4 but the StackInstance asks for 5 processes (2 processes per CPU, spec.dpdk.lcoresPerCPU); kubelet's static CPU manager must give it 3 exclusive CPUs"}},
		"no device info": {func(h *harness, _ *fsv1.StackInstanceSpec) {
			_ = os.Remove(filepath.Join(h.paths.PodSocketDir, "net1.json"))
		},
			[]string{`port data: attachment "net1"`, "net1.json", "fstack-cni"}},
		"broken device info": {func(h *harness, _ *fsv1.StackInstanceSpec) {
			_ = os.WriteFile(filepath.Join(h.paths.PodSocketDir, "net1.json"), []byte(`{"type":"vhost-user"}`), 0o644)
		}, []string{"vhost-user.path is missing"}},
		"no PCIDEVICE": {func(_ *harness, s *fsv1.StackInstanceSpec) {
			pciPort(s)
		}, []string{"environment variable PCIDEVICE_INTEL_COM_VF is not set", "SR-IOV device plugin"}},
		// The same checks `kubectl fstack render` runs on --pci and --addr (render.ParsePCIDevices,
		// render.AttachmentOf), in the same words.
		"PCIDEVICE not a PCI address": {func(h *harness, s *fsv1.StackInstanceSpec) {
			pciPort(s)
			h.env = map[string]string{"PCIDEVICE_INTEL_COM_VF": "5e:02"}
		}, []string{`environment variable PCIDEVICE_INTEL_COM_VF: "5e:02" is not a PCI address`}},
		"device info address without prefix": {func(h *harness, _ *fsv1.StackInstanceSpec) {
			mustDo(h.t, podcontract.WriteDevInfo(filepath.Join(h.paths.PodSocketDir, "net1.json"), &podcontract.DevInfo{
				Type: podcontract.DevInfoTypeVhostUser, VhostUser: &podcontract.DevInfoVhostUser{Mode: podcontract.VhostUserModeServer, Path: "/x.sock"},
				IPs: []string{"10.1.0.5"},
			}))
		}, []string{`attachment address "10.1.0.5" is not an IP address with its prefix length`}},
		"not hugetlbfs": {func(h *harness, _ *fsv1.StackInstanceSpec) { h.fsType = 0x01021994 },
			[]string{"is not a hugetlbfs mount (filesystem type 0x1021994)", "emptyDir{medium: HugePages-2Mi}"}},
		"wrong page size": {func(h *harness, _ *fsv1.StackInstanceSpec) { h.bsize = 1 << 30 },
			[]string{"has 1048576 KiB pages but the StackInstance asks for 2Mi"}},
		"cpuset narrower than affinity": {func(h *harness, _ *fsv1.StackInstanceSpec) {
			h.paths.CpusetFile = filepath.Join(h.t.TempDir(), "cpuset.cpus")
			_ = os.WriteFile(h.paths.CpusetFile, []byte("2\n"), 0o644)
		}, []string{"CPU 3 of the supervisor's affinity (2-3) is outside the container's cpuset 2"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := vhostSpec(2)
			h := newHarness(t, spec)
			h.writeDevinfo()
			tc.mutate(h, spec)
			_, err := h.facts().Gather(checked(t, spec))
			if err == nil {
				t.Fatal("Gather accepted a bad fact")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestNoHugeSkipsTheHugepageCheck(t *testing.T) {
	spec := vhostSpec(1)
	spec.DPDK.NoHuge, spec.DPDK.Memory = true, new(resource.MustParse("256Mi"))
	h := newHarness(t, spec)
	h.writeDevinfo()
	h.fsType = 0
	if _, err := h.facts().Gather(checked(t, spec)); err != nil {
		t.Fatal(err)
	}
}

func TestLoadSpecErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadSpec(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "downward API") {
		t.Errorf("missing: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	_ = os.WriteFile(empty, nil, 0o644)
	if _, err := LoadSpec(empty); err == nil || !strings.Contains(err.Error(), "no kubefstack.io/spec annotation") {
		t.Errorf("empty: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	_ = os.WriteFile(bad, []byte(`{"processes": "two"}`), 0o644)
	if _, err := LoadSpec(bad); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("bad: %v", err)
	}
}

// pciPort makes the spec's port a function of the SR-IOV resource intel.com/vf, statically
// addressed (a PCI port's CNI plugin reports no address).
func pciPort(s *fsv1.StackInstanceSpec) {
	s.Ports[0].Device = fsv1.PortDevice{PCI: &fsv1.PCIDevice{Resource: "intel.com/vf"}}
	s.Ports[0].Addressing = fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "192.168.1.2/24", Gateway: "192.168.1.1"}}
}

// Under the lab's cpuPolicy Shared the dataplane runs on the node's shared pool, beside the app
// and the switch's PMD: its lcore takes a CPU neither polls on, the highest, and the placement
// says so for the launchers. Before, the lcore took the first CPU, the PMD's and the app's.
func TestGatherPlacesSharedLcoresOffTheSwitchAndTheApp(t *testing.T) {
	spec := vhostSpec(1)
	spec.DPDK.CPUPolicy = fsv1.CPUShared
	h := newHarness(t, spec)
	h.writeDevinfo()
	info, err := podcontract.ReadDevInfo(filepath.Join(h.paths.PodSocketDir, "net1.json"))
	mustDo(t, err)
	info.SwitchCPUs = []int{0}
	mustDo(t, podcontract.WriteDevInfo(filepath.Join(h.paths.PodSocketDir, "net1.json"), info))
	h.cpus = []int{0, 1, 2}
	facts, err := h.facts().Gather(checked(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(facts.DataplaneCPUs, []int{2}) {
		t.Errorf("lcore CPUs = %v, want [2]: off the switch's CPU 0, the highest of the pool", facts.DataplaneCPUs)
	}
	want := &podcontract.Placement{LcoreCPUs: []int{2}, SwitchCPUs: []int{0}}
	if !reflect.DeepEqual(facts.Placement, want) {
		t.Errorf("placement = %+v, want %+v", facts.Placement, want)
	}

	// One CPU for everything: it runs, and the placement says what it shares.
	h.cpus = []int{0}
	facts, err = h.facts().Gather(checked(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	if w := facts.Placement.Warnings; len(w) != 2 {
		t.Errorf("one CPU shared with the switch and the app: warnings %q", w)
	}

	// Exclusive CPUs: lcore k on the k-th, as before.
	spec.DPDK.CPUPolicy = fsv1.CPUExclusive
	h = newHarness(t, spec)
	h.writeDevinfo()
	h.cpus = []int{4, 5}
	facts, err = h.facts().Gather(checked(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(facts.DataplaneCPUs, []int{4}) || len(facts.Placement.Warnings) != 0 {
		t.Errorf("exclusive: lcore CPUs %v, warnings %q; want [4], none", facts.DataplaneCPUs, facts.Placement.Warnings)
	}
}

// A program (spec.program) is the F-Stack processes itself, with no app under the shim: under
// cpuPolicy Shared with every CPU of the pool an lcore, nothing shares them, and the placement
// says nothing (its warnings become a Warning Event on the pod). A shim app in that pool would.
func TestGatherWarnsOfTheAppOnlyWhereThereIsOne(t *testing.T) {
	spec := vhostSpec(2)
	spec.DPDK.CPUPolicy = fsv1.CPUShared
	h := newHarness(t, spec)
	h.writeDevinfo()
	h.cpus = []int{0, 1}
	facts, err := h.facts().Gather(checked(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	if w := facts.Placement.Warnings; len(w) != 1 || !strings.Contains(w[0], "no CPU beside the lcores' for the app") {
		t.Errorf("a shim app on a pool of lcores: warnings %q, want the app's", w)
	}

	spec.Program = &fsv1.ProgramSpec{Mode: fsv1.ProgramPerProcess}
	h = newHarness(t, spec)
	h.writeDevinfo()
	h.cpus = []int{0, 1}
	facts, err = h.facts().Gather(checked(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	if w := facts.Placement.Warnings; len(w) != 0 {
		t.Errorf("a program on a pool of lcores: warnings %q, want none", w)
	}
}
