package render

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// F-Stack keeps the EAL argv in a fixed array (DPDK_CONFIG_NUM 16 plus argv[0]) of fixed-size
// strings (DPDK_CONFIG_MAXLEN 256) and checks neither bound.
const (
	maxEALArgs   = 17
	maxEALArgLen = 255
)

// ealArgvs is the argv of every process, in process order.
func (p *plan) ealArgvs() [][]string {
	out := make([][]string, 0, len(p.lcores))
	for k := range p.lcores {
		out = append(out, p.ealArgs(k))
	}
	return out
}

// ealArgs is the argv F-Stack's dpdk_args_setup builds from the config for one process, in its
// order. The KubeFStack flavor differs in three places, all patches of the dataplane image: it
// keeps DPDK's default file prefix with vdevs, it adds --single-file-segments, and with
// lcoresPerCPU > 1 it pins the lcore with --lcores=<lcore>@<CPU> instead of -c.
func (p *plan) ealArgs(proc int) []string {
	s, d := p.spec, &p.spec.DPDK
	args := []string{"f-stack"}
	if d.NoHuge {
		args = append(args, "--no-huge")
	}
	if p.lcoresShareCPUs() {
		// Patch 0003, from podcontract.EnvLcoreCPUs (fstackEnv): in -c's slot.
		args = append(args, fmt.Sprintf("--lcores=%d@%d", p.lcores[proc], p.cpus[proc]))
	} else {
		args = append(args, "-c"+hexMask(p.lcores[proc:proc+1]))
	}
	if d.Channels != 0 {
		args = append(args, fmt.Sprintf("-n%d", d.Channels))
	}
	if d.Memory != nil {
		mib, _ := wholeMiB(d.Memory)
		args = append(args, fmt.Sprintf("-m%d", mib))
	}
	if d.LogLevel != 0 {
		args = append(args, fmt.Sprintf("--log-level=%d", d.LogLevel))
	}
	args = append(args, "--proc-type="+ProcType(proc))
	if d.BaseVirtAddr != "" {
		args = append(args, "--base-virtaddr="+d.BaseVirtAddr)
	}
	if d.FilePrefix != "" {
		args = append(args, "--file-prefix=container-"+d.FilePrefix)
	}
	for _, bdf := range p.allow {
		args = append(args, "--allow="+bdf)
	}
	args = append(args, p.vdevArgs()...)
	for i, b := range p.bonds {
		args = append(args, "--vdev", bondDevargs(i, &b))
	}
	if s.Dataplane.Flavor == fsv1.FlavorKubeFStack && !d.NoHuge {
		args = append(args, "--single-file-segments")
	}
	return args
}

func (p *plan) vdevArgs() []string {
	if len(p.vdevs) == 0 {
		return nil
	}
	var args []string
	for i, v := range p.vdevs {
		var b strings.Builder
		fmt.Fprintf(&b, "--vdev=virtio_user%d,path=%s", i, v.path)
		if q := p.vdevQueues(i); q != 0 {
			fmt.Fprintf(&b, ",queues=%d", q)
		}
		if v.cq {
			b.WriteString(",cq=1")
		}
		if v.qsize != 0 {
			fmt.Fprintf(&b, ",queue_size=%d", v.qsize)
		}
		if v.mac != "" {
			b.WriteString(",mac=" + v.mac)
		}
		args = append(args, b.String())
	}
	args = append(args, "--no-pci")
	if p.spec.DPDK.FilePrefix == "" && p.spec.Dataplane.Flavor == fsv1.FlavorUpstream {
		args = append(args, "--file-prefix=container")
	}
	return args
}

func bondDevargs(i int, b *bondPlan) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "net_bonding%d,mode=%d,slave=%s", i, b.spec.Mode, strings.Join(b.members, ",slave="))
	if b.spec.PrimaryMember != nil && int(*b.spec.PrimaryMember) < len(b.members) {
		sb.WriteString(",primary=" + b.members[*b.spec.PrimaryMember])
	}
	if b.spec.SocketID != 0 {
		fmt.Fprintf(&sb, ",socket_id=%d", b.spec.SocketID)
	}
	if b.spec.MAC != "" {
		sb.WriteString(",mac=" + b.spec.MAC)
	}
	if b.spec.XmitPolicy != "" {
		sb.WriteString(",xmit_policy=" + b.spec.XmitPolicy)
	}
	return sb.String()
}

// ProcType is the --proc-type of F-Stack process proc: the first is the primary, the rest its
// secondaries.
func ProcType(proc int) string {
	if proc == 0 {
		return "primary"
	}
	return "secondary"
}

// checkEAL enforces F-Stack's unchecked argv limits on the longest argv (every process's argv has
// the same length; only -c differs).
func checkEAL(args []string) field.ErrorList {
	var errs field.ErrorList
	ports := field.NewPath("spec", "ports")
	if len(args) > maxEALArgs {
		errs = append(errs, field.Invalid(ports, len(args), fmt.Sprintf(
			"F-Stack would build %d EAL arguments but has room for %d (no bounds check: memory "+
				"corruption): use fewer PCI devices, vhost-user ports or bonds, or drop optional DPDK "+
				"settings (memory, logLevel, baseVirtAddr)", len(args), maxEALArgs)))
	}
	for _, a := range args {
		if len(a) > maxEALArgLen {
			errs = append(errs, field.Invalid(ports, truncate(a, 60)+"...", fmt.Sprintf(
				"this EAL argument is %d bytes but F-Stack's buffer holds %d: use a shorter socket "+
					"path or MAC-less device", len(a), maxEALArgLen)))
		}
	}
	return errs
}

// shimEAL is the argv libff_syscall.so passes to rte_eal_init as a DPDK secondary: hard-coded in
// F-Stack, so nothing but the lcore comes from the config. A secondary takes
// --single-file-segments from the primary's shared config when it attaches (measured with
// Debian's DPDK, dataplane-image/test/dpdk/NOTES-single-file-segments.md). The KubeFStack
// flavor's shim adds --no-pci (dataplane-image/patches/0005-shim-secondary-no-pci.patch): it
// never polls a port, and without it EAL scans the node's PCI bus from the app's container.
func (p *plan) shimEAL() []string {
	if p.appCPU < 0 {
		return nil
	}
	args := []string{"ff-adapter", "-c" + hexMask([]int{p.appCPU}), "-n4", "--proc-type=secondary"}
	if p.spec.Dataplane.Flavor != fsv1.FlavorUpstream {
		args = append(args, "--no-pci")
	}
	return append(args, "--log-level=5")
}
