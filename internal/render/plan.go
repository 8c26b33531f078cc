package render

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// plan is the spec resolved against the facts: DPDK port ids, lcores, devices and addresses, all
// that config.ini and the EAL argv are written from.
type plan struct {
	spec   *fsv1.StackInstanceSpec
	lcores []int // lcore of process k: its CPU, except lcores sharing a CPU (lab; lcoreIDs)
	cpus   []int // CPU of process k
	ports  []portPlan
	vdevs  []vdevPlan
	bonds  []bondPlan
	allow  []string // PCI addresses DPDK may probe, ascending (= probe order)
	vlans  []vlanPlan
	appCPU int // -1 when unknown
	pools  *poolSet
}

type portPlan struct {
	spec   *fsv1.PortSpec
	path   *field.Path
	id     int
	lcores []int
	v4     *ipv4Plan
	v6     *ipv6Plan
	// slaves are the DPDK port ids of a bond's members.
	slaves []int
}

type ipv4Plan struct {
	addr, netmask, broadcast, gateway string
}

type ipv6Plan struct {
	addr    string
	prefix  int
	gateway string
}

type vdevPlan struct {
	path, mac       string
	queues, qsize   int32
	cq              bool
	pathField       *field.Path
	attachmentField *field.Path
}

type bondPlan struct {
	spec    *fsv1.BondDevice
	members []string // PCI addresses in spec order
	path    *field.Path
}

type vlanPlan struct {
	spec   *fsv1.VLANSpec
	path   *field.Path
	portID int
	v4     *ipv4Plan
	v6     *ipv6Plan
}

// resolve builds the plan, collecting every error instead of stopping at the first.
func resolve(s *fsv1.StackInstanceSpec, f *Facts, pools *poolSet) (*plan, field.ErrorList) {
	p := &plan{spec: s, appCPU: -1, pools: pools}
	var errs field.ErrorList
	errs = append(errs, p.resolveLcores(f)...)
	errs = append(errs, p.resolveDevices(f)...)
	errs = append(errs, p.resolvePortLcores()...)
	errs = append(errs, p.resolveAddresses(f)...)
	errs = append(errs, p.resolveVLANs()...)
	return p, errs
}

func (p *plan) resolveLcores(f *Facts) field.ErrorList {
	n := int(p.spec.Processes)
	path := field.NewPath("spec", "processes")
	cpus := f.DataplaneCPUs
	perCPU := int(p.spec.DPDK.LcoresPerCPU)
	if err := CheckDataplaneCPUs(cpus, n, perCPU); err != nil {
		return field.ErrorList{field.Invalid(path, n, err.Error())}
	}
	p.lcores, p.cpus = lcoreIDs(cpus, n)
	var errs field.ErrorList
	shared := min(len(cpus), n) // the lcores numbered as their CPU
	for _, c := range p.lcores[:shared] {
		if c >= maxLcore {
			errs = append(errs, field.Invalid(path, n, fmt.Sprintf(
				"CPU %d is beyond DPDK's RTE_MAX_LCORE (%d): F-Stack cannot use it as an lcore", c, maxLcore)))
		} else if shared < n && c >= p.lcores[shared] {
			errs = append(errs, field.Invalid(field.NewPath("spec", "dpdk", "lcoresPerCPU"), perCPU, fmt.Sprintf(
				"CPU %d is at or above lcore %d, the first of the ids lcores sharing a CPU take (%d-%d): "+
					"use lcoresPerCPU 1 on this node", c, p.lcores[shared], p.lcores[shared], maxLcore-1)))
		}
	}
	if len(f.AppCPUs) > 0 {
		p.appCPU = f.AppCPUs[0]
		errs = append(errs, p.checkAppCPU()...)
	}
	return errs
}

// maxLcore is RTE_MAX_LCORE of DPDK's default x86 build.
const maxLcore = 128

// lcoreIDs numbers the lcores of n processes on the container's CPUs and gives each its CPU,
// round robin. Without sharing (one CPU per process) lcore k is CPU k, as F-Stack expects.
// Lcores sharing a CPU (spec.dpdk.lcoresPerCPU, lab only) need ids of their own: F-Stack maps
// process k to the k-th bit of lcore_mask and ports' lcore_list and queues are by lcore id, and
// DPDK keeps per-lcore state (mempool caches) in shared memory, so no two processes of the
// stack, nor a shim (FF_INITIAL_LCORE_ID names a CPU up to podcontract.MaxShimLcore), nor
// F-Stack's tools (lcore 0), may have the same id. The first process on each CPU keeps the CPU's
// number; the others take the highest ids, below RTE_MAX_LCORE, in process order, so the ids
// ascend with k and stay above any shim's. Patch 0003 then pins each to its CPU with --lcores.
func lcoreIDs(cpus []int, n int) (lcores, onCPU []int) {
	m := min(len(cpus), n)
	for k := 0; k < n; k++ {
		onCPU = append(onCPU, cpus[k%m])
		if k < m {
			lcores = append(lcores, cpus[k])
		} else {
			lcores = append(lcores, maxLcore-n+k)
		}
	}
	return lcores, onCPU
}

func (p *plan) checkAppCPU() field.ErrorList {
	if !*p.spec.Shim.Enabled {
		return nil
	}
	path := field.NewPath("spec", "shim")
	switch {
	case p.appCPU > podcontract.MaxShimLcore:
		return field.ErrorList{field.Invalid(path, p.appCPU, fmt.Sprintf(
			"the app container's first CPU is %d, but the shim's %s only names CPUs "+
				"0-%d (larger values silently become CPU 2)", p.appCPU, podcontract.EnvShimInitialLcore, podcontract.MaxShimLcore))}
	case slices.Contains(p.lcores, p.appCPU):
		return field.ErrorList{field.Invalid(path, p.appCPU, fmt.Sprintf(
			"the app container's CPU %d is also an F-Stack lcore: DPDK processes must use distinct "+
				"lcores; give the app container CPUs of its own", p.appCPU))}
	}
	return nil
}

// resolveDevices assigns DPDK port ids the way DPDK probes: vdevs 0..n-1 (F-Stack then passes
// --no-pci); otherwise PCI functions in address order, then bonds.
func (p *plan) resolveDevices(f *Facts) field.ErrorList {
	var errs field.ErrorList
	taken := map[string]int{} // resource -> devices already handed out
	pciOf := map[int]string{}
	bondOf := map[int]*bondPlan{}
	kinds := map[string]*field.Path{}
	for i := range p.spec.Ports {
		ps := &p.spec.Ports[i]
		path := field.NewPath("spec", "ports").Index(i)
		p.ports = append(p.ports, portPlan{spec: ps, path: path})
		dev, dpath := ps.Device, path.Child("device")
		switch {
		case dev.VhostUser != nil:
			kinds["vhostUser"] = dpath
			v, e := vdevFor(ps, dev.VhostUser, f, path)
			errs = append(errs, e...)
			p.ports[i].id = len(p.vdevs)
			p.vdevs = append(p.vdevs, v)
		case dev.PCI != nil:
			kinds["pci"] = dpath
			bdf, e := pciAddress(dev.PCI, f, taken, dpath.Child("pci"))
			errs = append(errs, e...)
			pciOf[i] = bdf
		case dev.Bond != nil:
			kinds["bond"] = dpath
			b := &bondPlan{spec: dev.Bond, path: dpath.Child("bond")}
			for j := range dev.Bond.Members {
				bdf, e := pciAddress(&dev.Bond.Members[j], f, taken, b.path.Child("members").Index(j))
				errs = append(errs, e...)
				b.members = append(b.members, bdf)
			}
			bondOf[i] = b
		}
	}
	if kinds["vhostUser"] != nil && (kinds["pci"] != nil || kinds["bond"] != nil) {
		other := kinds["pci"]
		if other == nil {
			other = kinds["bond"]
		}
		errs = append(errs, field.Invalid(other, "pci", "vhost-user and PCI ports cannot be mixed in one "+
			"stack: F-Stack passes --no-pci to DPDK whenever a vhost-user port ([vdevN]) exists"))
	}
	errs = append(errs, p.assignPCIPortIDs(pciOf, bondOf)...)
	return errs
}

func (p *plan) assignPCIPortIDs(pciOf map[int]string, bondOf map[int]*bondPlan) field.ErrorList {
	var errs field.ErrorList
	owner := map[string]*field.Path{}
	note := func(bdf string, path *field.Path) {
		if bdf == "" {
			return
		}
		if prev, dup := owner[bdf]; dup {
			errs = append(errs, field.Duplicate(path, bdf+" (also used by "+prev.String()+")"))
			return
		}
		owner[bdf] = path
		p.allow = append(p.allow, bdf)
	}
	for i := range p.ports {
		if bdf, ok := pciOf[i]; ok {
			note(bdf, p.ports[i].path.Child("device", "pci"))
		}
		if b, ok := bondOf[i]; ok {
			for j, m := range b.members {
				note(m, b.path.Child("members").Index(j))
			}
		}
	}
	sort.Strings(p.allow)
	idOf := map[string]int{}
	for i, bdf := range p.allow {
		idOf[bdf] = i
	}
	for i := range p.ports {
		if bdf, ok := pciOf[i]; ok {
			p.ports[i].id = idOf[bdf]
		}
		if b, ok := bondOf[i]; ok {
			p.ports[i].id = len(p.allow) + len(p.bonds)
			for _, m := range b.members {
				p.ports[i].slaves = append(p.ports[i].slaves, idOf[m])
			}
			sort.Ints(p.ports[i].slaves)
			p.bonds = append(p.bonds, *b)
		}
	}
	return errs
}

func vdevFor(ps *fsv1.PortSpec, vu *fsv1.VhostUserDevice, f *Facts, path *field.Path) (vdevPlan, field.ErrorList) {
	v := vdevPlan{
		mac: vu.MAC, queues: vu.Queues, qsize: vu.QueueSize, cq: vu.ControlQueue,
		pathField:       path.Child("device", "vhostUser"),
		attachmentField: path.Child("attachment"),
	}
	att, ok := f.Attachments[ps.Attachment]
	if !ok || att.SocketPath == "" {
		return v, field.ErrorList{field.Invalid(v.attachmentField, ps.Attachment, fmt.Sprintf(
			"no vhost-user socket is known for attachment %q: attach the pod to a network served by "+
				"fstack-cni with interface name %q (or set attachment to the interface that is)",
			ps.Attachment, ps.Attachment))}
	}
	v.path = att.SocketPath
	if att.Server {
		// F-Stack has no [vdevN] key for it, but pastes path verbatim into the virtio_user
		// devargs, so the option rides on the path, unpatched, in config.ini and the EAL argv.
		v.path += ",server=1"
	}
	if v.mac == "" {
		v.mac = att.MAC
	} else if !att.Placeholder && att.MAC != "" && !sameMAC(v.mac, att.MAC) {
		// One MAC on both sides: the network (fstack-cni's anti-spoofing rules on its bridge,
		// the pod's network-status) knows the attachment's, and drops or misroutes frames
		// F-Stack would send from another.
		return v, field.ErrorList{field.Invalid(v.pathField.Child("mac"), vu.MAC, fmt.Sprintf(
			"the attachment %q has MAC %s (the CNI plugin's device info), and its network drops frames "+
				"from any other source MAC: remove mac to use the attachment's, or set it to %s",
			ps.Attachment, att.MAC, att.MAC))}
	}
	return v, nil
}

// sameMAC compares two MACs as addresses, whatever their case or separators.
func sameMAC(a, b string) bool {
	x, errA := net.ParseMAC(a)
	y, errB := net.ParseMAC(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// pciAddress resolves a literal address or the next device of a device-plugin resource.
func pciAddress(d *fsv1.PCIDevice, f *Facts, taken map[string]int, path *field.Path) (string, field.ErrorList) {
	if d.Address != "" {
		bdf, ok := normalizeBDF(d.Address)
		if !ok {
			return "", field.ErrorList{field.Invalid(path.Child("address"), d.Address,
				"not a PCI address: use domain:bus:device.function, e.g. 0000:3b:02.0")}
		}
		return bdf, nil
	}
	devs := f.PCIResources[d.Resource]
	k := taken[d.Resource]
	taken[d.Resource]++
	if k >= len(devs) {
		return "", field.ErrorList{field.Invalid(path.Child("resource"), d.Resource, fmt.Sprintf(
			"the pod got %d device(s) of resource %s (%s) but this is use number %d of it: request "+
				"one %s per port that uses it in the pod's resources", len(devs), d.Resource,
			PCIResourceEnv(d.Resource), k+1, d.Resource))}
	}
	bdf, ok := normalizeBDF(devs[k])
	if !ok {
		return "", field.ErrorList{field.Invalid(path.Child("resource"), d.Resource, fmt.Sprintf(
			"%s holds %q, which is not a PCI address", PCIResourceEnv(d.Resource), devs[k]))}
	}
	return bdf, nil
}

// normalizeBDF returns the lower-case domain:bus:device.function form DPDK sorts by.
func normalizeBDF(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if strings.Count(s, ":") == 1 {
		s = "0000:" + s
	}
	var dom, bus, dev, fn int
	if n, err := fmt.Sscanf(s, "%04x:%02x:%02x.%1x", &dom, &bus, &dev, &fn); n != 4 || err != nil {
		return "", false
	}
	norm := fmt.Sprintf("%04x:%02x:%02x.%x", dom, bus, dev, fn)
	return norm, norm == s && dev < 32 && fn < 8
}

// resolvePortLcores maps each port's process indices to lcores; every process must serve a port.
func (p *plan) resolvePortLcores() field.ErrorList {
	if len(p.lcores) == 0 {
		return nil
	}
	var errs field.ErrorList
	served := make([]bool, len(p.lcores))
	for i := range p.ports {
		pp := &p.ports[i]
		procs := pp.spec.Processes
		if len(procs) == 0 {
			for k := range p.lcores {
				procs = append(procs, int32(k))
			}
		}
		// Each index is below spec.processes (the CRD's rule, which Prepare holds the spec to).
		for _, k := range procs {
			served[k] = true
			pp.lcores = append(pp.lcores, p.lcores[k])
		}
		sort.Ints(pp.lcores)
	}
	for k, ok := range served {
		if !ok {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ports"), k, fmt.Sprintf(
				"process %d serves no port (F-Stack exits: \"lcore has nothing to do\"): add it to a "+
					"port's processes, or lower spec.processes", k)))
		}
	}
	return errs
}
