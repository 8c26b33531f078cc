package facts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/cpuaffinity"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// hugetlbfsMagic is HUGETLBFS_MAGIC from linux/magic.h.
const hugetlbfsMagic = 0x958458f6

// FactSource is where the pod's facts come from; every source is a field so tests use fakes.
type FactSource struct {
	Paths Paths
	// Affinity is the supervisor's own CPU affinity (sched_getaffinity): kubelet's static CPU
	// manager gives the dataplane container its exclusive CPUs through it.
	Affinity func() ([]int, error)
	// LookupEnv reads the environment (PCIDEVICE_* of the SR-IOV device plugin).
	LookupEnv func(string) (string, bool)
	// Statfs reports the filesystem of a path.
	Statfs func(string, *unix.Statfs_t) error
	// Cgroup finds the container's cpuset when Paths.CpusetFile is empty; nil skips the check.
	Cgroup *CgroupSource
	// Logf says which cpuset the affinity was checked against, or why it was not; nil: silent.
	Logf func(format string, args ...any)
}

// OSFactSource reads the real process and filesystem.
func OSFactSource(p Paths) *FactSource {
	return &FactSource{Paths: p, Affinity: cpuaffinity.Own, LookupEnv: os.LookupEnv, Statfs: unix.Statfs,
		Cgroup: &CgroupSource{Root: "/"}}
}

func (f *FactSource) logf(format string, args ...any) {
	if f.Logf != nil {
		f.Logf(format, args...)
	}
}

// Gather collects the facts the spec needs and checks them, naming the fact that is missing or
// wrong and what provides it. Every problem is reported, not only the first.
func (f *FactSource) Gather(spec *render.Spec) (*render.Facts, error) {
	s := spec.Defaulted()
	facts := &render.Facts{
		PCIResources: map[string][]string{},
		Attachments:  map[string]render.Attachment{},
	}
	var errs []error
	errs = append(errs, f.attachments(s, facts)...)
	if cpus, err := f.cpus(int(s.Processes), int(s.DPDK.LcoresPerCPU)); err != nil {
		errs = append(errs, err)
	} else {
		facts.DataplaneCPUs, facts.Placement = place(s, cpus, facts.Attachments)
	}
	errs = append(errs, f.pciResources(s, facts)...)
	if !s.DPDK.NoHuge {
		if err := f.hugepages(s.Dataplane.HugePages.PageSize); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("the pod's facts do not fit the StackInstance:\n  %w", joinLines(errs))
	}
	return facts, nil
}

func joinLines(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "\n  "))
}

// place picks the lcores' CPUs among the dataplane's cpus: off the CPUs the switch polls on
// (the CNI plugin's device info) and, under cpuPolicy Shared, where the app containers run on
// the same pool, the highest, leaving the rest to the app (podcontract.PlaceLcores).
func place(s *fsv1.StackInstanceSpec, cpus []int, atts map[string]render.Attachment) ([]int, *podcontract.Placement) {
	var switchCPUs []int
	for _, a := range atts {
		for _, c := range a.SwitchCPUs {
			if !slices.Contains(switchCPUs, c) {
				switchCPUs = append(switchCPUs, c)
			}
		}
	}
	slices.Sort(switchCPUs)
	shared := s.DPDK.CPUPolicy == fsv1.CPUShared
	lcores := podcontract.PlaceLcores(cpus, render.DataplaneCPUCount(int(s.Processes), int(s.DPDK.LcoresPerCPU)), switchCPUs, shared)
	// Under Shared the app containers' cpuset is this one, the pool, so what their launchers
	// will make of it is known here. A program (spec.program) is the F-Stack processes itself:
	// no app runs under the shim, and none can share an lcore's CPU.
	var appCPUs []int
	if shared && s.Program == nil {
		appCPUs = cpus
	}
	return lcores, &podcontract.Placement{LcoreCPUs: lcores, SwitchCPUs: switchCPUs,
		Warnings: podcontract.PlacementWarnings(lcores, switchCPUs, appCPUs)}
}

func (f *FactSource) cpus(processes, lcoresPerCPU int) ([]int, error) {
	cpus, err := f.Affinity()
	if err != nil {
		return nil, fmt.Errorf("dataplane CPUs: %w", err)
	}
	if err := f.crossCheckCpuset(cpus); err != nil {
		return nil, err
	}
	if err := render.CheckDataplaneCPUs(cpus, processes, lcoresPerCPU); err != nil {
		return nil, fmt.Errorf("dataplane CPUs: %w", err)
	}
	return cpus, nil
}

// crossCheckCpuset refuses an affinity wider than the cgroup's cpuset: EAL pins to CPUs outside
// it fail ("Cannot set affinity") or abort the process. It logs which cpuset it read, or why
// there was none to read.
func (f *FactSource) crossCheckCpuset(cpus []int) error {
	file, layout := f.cpusetFile()
	if file == "" {
		f.logf("cpuset cross-check skipped: %s; the CPU affinity (%s) is all there is", layout, render.FormatCPUList(cpus))
		return nil
	}
	data, err := readProc(file)
	if err != nil {
		f.logf("cpuset cross-check skipped: %s: %v", layout, err)
		return nil
	}
	text := strings.TrimSpace(string(data))
	list, err := render.ParseCPUList(text)
	if err != nil || len(list) == 0 {
		f.logf("cpuset cross-check skipped: %s: %s holds no CPU list (%q)", layout, file, text)
		return nil
	}
	set := cpuset.New(list...)
	f.logf("cpuset cross-check: %s, %s = %s", layout, file, set)
	if outside := cpuset.New(cpus...).Difference(set); !outside.IsEmpty() {
		return fmt.Errorf("dataplane CPUs: CPU %d of the supervisor's affinity (%s) is outside the container's cpuset %s (%s); do not start it under taskset",
			outside.List()[0], render.FormatCPUList(cpus), set, file)
	}
	return nil
}

// cpusetFile is the file to cross-check against and the layout it comes from, or "" and why
// there is none.
func (f *FactSource) cpusetFile() (file, layout string) {
	switch f.Paths.CpusetFile {
	case CpusetNone:
		return "", "--cpuset-file=" + CpusetNone
	case "":
		if f.Cgroup == nil {
			return "", "no cgroup source configured"
		}
		loc := f.Cgroup.Locate()
		if loc.File == "" {
			return "", loc.Skip
		}
		return loc.File, loc.Layout
	}
	return f.Paths.CpusetFile, "--cpuset-file"
}

// attachments reads the CNI plugin's device-info file of every port: required for vhost-user
// ports (the socket path), optional otherwise (addresses "from the attachment").
func (f *FactSource) attachments(s *fsv1.StackInstanceSpec, facts *render.Facts) []error {
	var errs []error
	for i := range s.Ports {
		p := &s.Ports[i]
		path := filepath.Join(f.Paths.PodSocketDir, podcontract.DevInfoFile(p.Attachment))
		info, err := podcontract.ReadDevInfo(path)
		if err != nil {
			if p.Device.VhostUser != nil || !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("port %s: attachment %q: %w; the CNI plugin (fstack-cni) writes %s when it attaches the pod's interface %s",
					p.Name, p.Attachment, err, path, p.Attachment))
			}
			continue
		}
		a, err := render.AttachmentOf(info)
		if err != nil {
			errs = append(errs, fmt.Errorf("port %s: attachment %q: %w (in %s, which the CNI plugin fstack-cni writes)", p.Name, p.Attachment, err, path))
			continue
		}
		facts.Attachments[p.Attachment] = a
	}
	return errs
}

// pciResources reads PCIDEVICE_<RESOURCE> for every device that names a device-plugin resource.
func (f *FactSource) pciResources(s *fsv1.StackInstanceSpec, facts *render.Facts) []error {
	var errs []error
	add := func(where string, d *fsv1.PCIDevice) {
		if d.Resource == "" || facts.PCIResources[d.Resource] != nil {
			return
		}
		names := render.PCIResourceEnvNames(d.Resource)
		v, ok := "", false
		for _, env := range names {
			if v, ok = f.LookupEnv(env); ok && strings.TrimSpace(v) != "" {
				break
			}
		}
		if !ok || strings.TrimSpace(v) == "" {
			errs = append(errs, fmt.Errorf("%s: resource %s: environment variable %s is not set; the SR-IOV device plugin sets it when the dataplane container requests %s",
				where, d.Resource, oneOf(names), d.Resource))
			return
		}
		devs, err := render.ParsePCIDevices(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: resource %s: environment variable %s: %w", where, d.Resource, oneOf(names), err))
			return
		}
		facts.PCIResources[d.Resource] = devs
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Device.PCI != nil {
			add("port "+p.Name, p.Device.PCI)
		}
		if p.Device.Bond != nil {
			for j := range p.Device.Bond.Members {
				add(fmt.Sprintf("port %s bond member %d", p.Name, j), &p.Device.Bond.Members[j])
			}
		}
	}
	return errs
}

// oneOf names the first spelling, and the others in parentheses.
func oneOf(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return names[0] + " (or " + strings.Join(names[1:], ", ") + ")"
}

// hugepages checks that the shared hugepage volume is mounted and has the spec's page size:
// DPDK would otherwise fall back to whatever mount it finds, which secondaries cannot share.
func (f *FactSource) hugepages(pageSize fsv1.HugePageSize) error {
	dir := f.Paths.HugePagesDir
	var st unix.Statfs_t
	if err := f.Statfs(dir, &st); err != nil {
		return fmt.Errorf("hugepages: %s: %w; the pod needs an emptyDir{medium: HugePages-%s} mounted there", dir, err, pageSize)
	}
	if uint32(st.Type) != hugetlbfsMagic {
		return fmt.Errorf("hugepages: %s is not a hugetlbfs mount (filesystem type 0x%x); the pod needs an emptyDir{medium: HugePages-%s} mounted there and a hugepages-%s request",
			dir, uint32(st.Type), pageSize, pageSize)
	}
	want := map[fsv1.HugePageSize]int64{fsv1.HugePages2Mi: 2 << 20, fsv1.HugePages1Gi: 1 << 30}[pageSize]
	if want != 0 && st.Bsize != want {
		return fmt.Errorf("hugepages: %s has %d KiB pages but the StackInstance asks for %s (dataplane.hugePages.pageSize); mount an emptyDir{medium: HugePages-%s}",
			dir, st.Bsize>>10, pageSize, pageSize)
	}
	return nil
}
