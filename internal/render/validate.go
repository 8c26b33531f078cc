package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// checkSpec runs the checks that need no pod facts: combinations F-Stack accepts but then
// crashes on, silently ignores, or cannot serve. s has its defaults applied.
func checkSpec(s *fsv1.StackInstanceSpec) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, checkVersion(s)...)
	errs = append(errs, checkMemory(s)...)
	errs = append(errs, checkShim(s)...)
	errs = append(errs, checkVhostUser(s)...)
	errs = append(errs, checkNetworks(s)...)
	errs = append(errs, checkAddressesUnique(s)...)
	errs = append(errs, checkBonds(s)...)
	errs = append(errs, checkKNI(s)...)
	errs = append(errs, checkPcap(s)...)
	errs = append(errs, checkRSS(s)...)
	errs = append(errs, checkLcoresPerCPU(s)...)
	return errs
}

// checkLcoresPerCPU: lcores share a CPU only through patch 0003 (--lcores=<lcore>@<CPU>); an
// unpatched F-Stack would pass -c with lcore ids that are no CPU of the container.
func checkLcoresPerCPU(s *fsv1.StackInstanceSpec) field.ErrorList {
	if s.DPDK.LcoresPerCPU > 1 && s.Dataplane.Flavor == fsv1.FlavorUpstream {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "dpdk", "lcoresPerCPU"),
			"lcores share a CPU only with the KubeFStack flavor's patch 0003 (EAL --lcores); "+
				"upstream F-Stack pins lcore k to CPU k: use lcoresPerCPU 1 or flavor KubeFStack")}
	}
	return nil
}

func checkVersion(s *fsv1.StackInstanceSpec) field.ErrorList {
	var errs field.ErrorList
	// The version is one of the two (the CRD's enum, which Prepare holds the spec to).
	if s.FStackVersion == fsv1.FStackV124 {
		if s.RSSCheck != nil {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "rssCheck"),
				"[rss_check] exists from F-Stack v1.25 on; 1.24 would silently ignore it"))
		}
		if s.DPDK.FStackLogLevel != 0 || s.DPDK.FStackLogFilePrefix != "" {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "dpdk", "fstackLogLevel"),
				"fstack_log_level and fstack_log_file_prefix exist from F-Stack v1.25 on"))
		}
	}
	return errs
}

func checkMemory(s *fsv1.StackInstanceSpec) field.ErrorList {
	var errs field.ErrorList
	d := &s.DPDK
	path := field.NewPath("spec", "dpdk")
	if d.Memory != nil {
		if _, ok := wholeMiB(d.Memory); !ok {
			errs = append(errs, field.Invalid(path.Child("memory"), d.Memory.String(),
				"must be a positive whole number of MiB, e.g. 512Mi"))
		} else if !d.NoHuge && d.Memory.Cmp(*s.Dataplane.HugePages.Amount) > 0 {
			errs = append(errs, field.Invalid(path.Child("memory"), d.Memory.String(), fmt.Sprintf(
				"exceeds the dataplane's hugepages (%s): raise spec.dataplane.hugePages.amount or lower memory",
				s.Dataplane.HugePages.Amount)))
		}
	}
	if d.NoHuge {
		if s.Processes > 1 {
			errs = append(errs, field.Invalid(path.Child("noHuge"), true,
				"without hugepages DPDK memory is private to the primary: secondaries cannot attach, so only one process can run"))
		}
		if *s.Shim.Enabled {
			errs = append(errs, field.Invalid(path.Child("noHuge"), true,
				"without hugepages the shim (a DPDK secondary) cannot attach: set spec.shim.enabled=false"))
		}
	}
	hp := field.NewPath("spec", "dataplane", "hugePages")
	if a := s.Dataplane.HugePages.Amount; a.Sign() <= 0 {
		errs = append(errs, field.Invalid(hp.Child("amount"), a.String(), "must be positive"))
	} else if page := resource.MustParse(string(s.Dataplane.HugePages.PageSize)); a.Value()%page.Value() != 0 {
		errs = append(errs, field.Invalid(hp.Child("amount"), a.String(), fmt.Sprintf(
			"must be a whole number of %s pages", s.Dataplane.HugePages.PageSize)))
	}
	return errs
}

func wholeMiB(q *resource.Quantity) (int64, bool) {
	v := q.Value()
	return v >> 20, v > 0 && v%(1<<20) == 0
}

func checkShim(s *fsv1.StackInstanceSpec) field.ErrorList {
	sh := &s.Shim
	if !*sh.Enabled {
		return nil
	}
	var errs field.ErrorList
	if s.DPDK.FilePrefix != "" {
		errs = append(errs, field.Invalid(field.NewPath("spec", "dpdk", "filePrefix"), s.DPDK.FilePrefix,
			"the shim (libff_syscall.so) and F-Stack's tools only attach to DPDK's default file prefix "+
				"'rte', but F-Stack runs with prefix 'container-"+s.DPDK.FilePrefix+"': remove filePrefix "+
				"(each pod has its own DPDK runtime directory anyway) or disable the shim"))
	}
	if s.Dataplane.Flavor == fsv1.FlavorUpstream && HasVhostUser(s) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "dataplane", "flavor"), s.Dataplane.Flavor,
			"with a vhost-user port, upstream F-Stack forces DPDK file prefix 'container', but the shim "+
				"and the tools only attach to prefix 'rte', so Nginx would silently fall back to kernel "+
				"sockets: use the KubeFStack flavor (patched to keep 'rte') or disable the shim"))
	}
	return errs
}

func checkVhostUser(s *fsv1.StackInstanceSpec) field.ErrorList {
	var errs field.ErrorList
	for i := range s.Ports {
		vu := s.Ports[i].Device.VhostUser
		if vu == nil {
			continue
		}
		path := field.NewPath("spec", "ports").Index(i).Child("device", "vhostUser")
		procs := int32(len(s.Ports[i].Processes))
		if procs == 0 {
			procs = s.Processes
		}
		if vu.Queues != 0 && vu.Queues < procs {
			errs = append(errs, field.Invalid(path.Child("queues"), vu.Queues, fmt.Sprintf(
				"%d processes serve this port and each needs its own queue pair (F-Stack exits "+
					"\"num_procs bigger than max_rx_queues\"): set queues to at least %d", procs, procs)))
		}
		if q := vu.QueueSize; q != 0 && q&(q-1) != 0 {
			errs = append(errs, field.Invalid(path.Child("queueSize"), q, "must be a power of two"))
		}
	}
	errs = append(errs, checkVhostUserAttachments(s)...)
	if HasVhostUser(s) && s.Dataplane.Flavor == fsv1.FlavorUpstream &&
		s.Dataplane.HugePages.PageSize != fsv1.HugePages1Gi && !s.DPDK.NoHuge {
		errs = append(errs, field.Invalid(field.NewPath("spec", "dataplane", "hugePages", "pageSize"),
			s.Dataplane.HugePages.PageSize, "upstream F-Stack maps every 2Mi page as its own region and "+
				"vhost-user carries at most 8: the port connects but never passes a packet; use 1Gi pages "+
				"or the KubeFStack flavor (which adds --single-file-segments)"))
	}
	return errs
}

// checkVhostUserAttachments refuses two vhost-user ports on one attachment: both would open the
// attachment's one vhost-user socket, whose backend serves a single virtio_user device, so the
// second port never comes up and F-Stack stops at start-up on every node.
func checkVhostUserAttachments(s *fsv1.StackInstanceSpec) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i := range s.Ports {
		ps := &s.Ports[i]
		if ps.Device.VhostUser == nil {
			continue
		}
		if j, dup := seen[ps.Attachment]; dup {
			errs = append(errs, field.Duplicate(field.NewPath("spec", "ports").Index(i).Child("attachment"), fmt.Sprintf(
				"%s: vhost-user ports %s and %s both use attachment %s, whose vhost-user socket serves one device: "+
					"give each vhost-user port its own attachment (attachment defaults to the port's name)",
				ps.Attachment, s.Ports[j].Name, ps.Name, ps.Attachment)))
			continue
		}
		seen[ps.Attachment] = i
	}
	return errs
}

// checkAddressesUnique refuses a static address given to two interfaces (ports and VLANs) and a
// VIP that is an interface's address: the pod starts, but not serving the address as meant
// (the messages say how). Addresses are compared as addresses, not as
// text (2001:db8::a is 2001:DB8:0::A). Only what the spec states is compared: the webhook and
// the offline CLI see the same; addresses from a pool or an attachment are the pod's.
func checkAddressesUnique(s *fsv1.StackInstanceSpec) field.ErrorList {
	type iface struct {
		a    *fsv1.Addressing
		path *field.Path
	}
	var ifaces []iface
	for i := range s.Ports {
		ifaces = append(ifaces, iface{&s.Ports[i].Addressing, field.NewPath("spec", "ports").Index(i)})
	}
	for i := range s.VLANs {
		ifaces = append(ifaces, iface{&s.VLANs[i].Addressing, field.NewPath("spec", "vlans").Index(i)})
	}
	var errs field.ErrorList
	owner := map[netip.Addr]*field.Path{}
	note := func(text string, path *field.Path) {
		pfx, err := netip.ParsePrefix(text)
		if err != nil {
			return // refused with its own message where the address is parsed
		}
		a := pfx.Addr().WithZone("")
		if prev, dup := owner[a]; dup {
			errs = append(errs, field.Duplicate(path, fmt.Sprintf("%s (also the address of %s): give every interface of the stack its own "+
				"address; FreeBSD's stack keeps one local route per address, so only one of the two would receive for it",
				text, prev)))
			return
		}
		owner[a] = path
	}
	for _, f := range ifaces {
		if v4 := f.a.IPv4; v4 != nil && v4.From == fsv1.AddressStatic && v4.Address != "" {
			note(v4.Address, f.path.Child("ipv4", "address"))
		}
		if v6 := f.a.IPv6; v6 != nil && v6.From == fsv1.AddressStatic && v6.Address != "" {
			note(v6.Address, f.path.Child("ipv6", "address"))
		}
	}
	for _, f := range ifaces {
		for _, l := range []struct {
			name string
			list []string
		}{{"vips", f.a.VIPs}, {"vips6", f.a.VIPs6}} {
			for k, v := range l.list {
				a, err := netip.ParseAddr(v)
				if err != nil {
					continue // refused by checkAddrList
				}
				if prev, dup := owner[a.WithZone("")]; dup {
					errs = append(errs, field.Invalid(f.path.Child(l.name).Index(k), v, fmt.Sprintf(
						"is the address of %s: F-Stack adds a VIP as a /32 (or vipPrefixLength) alias, and FreeBSD "+
							"replaces an address the interface already has (the port loses its netmask and the "+
							"route to its subnet) or puts it on a second interface: remove the VIP, the interface "+
							"serves its own address anyway", prev)))
				}
			}
		}
	}
	return errs
}

// checkNetworks refuses two ports that ask Multus for the same interface: the injector writes
// one networks entry per port with interface: <attachment>, and Multus would make the second
// attachment fail in the pod's sandbox, long after admission.
func checkNetworks(s *fsv1.StackInstanceSpec) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i := range s.Ports {
		ps := &s.Ports[i]
		if ps.Network == nil {
			continue
		}
		if j, dup := seen[ps.Attachment]; dup {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ports").Index(i).Child("attachment"), ps.Attachment, fmt.Sprintf(
				"ports %s and %s both name a network for interface %s, and Multus gives a pod one attachment per interface: "+
					"give each port with a network its own attachment", s.Ports[j].Name, ps.Name, ps.Attachment)))
			continue
		}
		seen[ps.Attachment] = i
	}
	return errs
}

func checkBonds(s *fsv1.StackInstanceSpec) field.ErrorList {
	var errs field.ErrorList
	for i := range s.Ports {
		b := s.Ports[i].Device.Bond
		if b == nil {
			continue
		}
		path := field.NewPath("spec", "ports").Index(i).Child("device", "bond")
		if s.FStackVersion == fsv1.FStackV125 {
			errs = append(errs, field.Forbidden(path, "F-Stack v1.25 configures bonds with the slave= key, "+
				"which its DPDK 23.11 no longer accepts: the bond never probes. Use fstackVersion 1.24 or "+
				"separate ports"))
		}
		if s.Processes > 1 {
			errs = append(errs, field.Forbidden(path, "DPDK bonding works in a single process only: set "+
				"spec.processes to 1"))
		}
		if b.PrimaryMember != nil && int(*b.PrimaryMember) >= len(b.Members) {
			errs = append(errs, field.Invalid(path.Child("primaryMember"), *b.PrimaryMember,
				fmt.Sprintf("there are %d members", len(b.Members))))
		}
	}
	return errs
}

func checkKNI(s *fsv1.StackInstanceSpec) field.ErrorList {
	k := s.KNI
	if k == nil || !k.Enabled {
		return nil
	}
	path := field.NewPath("spec", "kni")
	var errs field.ErrorList
	errs = append(errs, checkPortRanges(k.TCPPorts, path.Child("tcpPorts"))...)
	errs = append(errs, checkPortRanges(k.UDPPorts, path.Child("udpPorts"))...)
	for i := range s.Ports {
		procs := s.Ports[i].Processes
		if len(procs) > 0 && !slices.Contains(procs, 0) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ports").Index(i).Child("processes"), procs,
				"with KNI enabled the primary (process 0) moves every port's exception traffic and must serve every port: add 0"))
		}
	}
	return errs
}

func checkPortRanges(list []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range list {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b > MaxPort || b < a {
			errs = append(errs, field.Invalid(path.Index(i), r, fmt.Sprintf("must be a port 0-%d or a range low-high", MaxPort)))
		}
	}
	return errs
}

func checkPcap(s *fsv1.StackInstanceSpec) field.ErrorList {
	pc := s.Pcap
	if pc == nil {
		return nil
	}
	path := field.NewPath("spec", "pcap")
	var errs field.ErrorList
	if pc.FileSize != nil && pc.FileSize.Value() < 8<<20 {
		errs = append(errs, field.Invalid(path.Child("fileSize"), pc.FileSize.String(),
			"must be at least 8Mi (F-Stack raises smaller values)"))
	}
	if len(pc.Directory) > MaxPcapDirectory {
		errs = append(errs, field.TooLong(path.Child("directory"), pc.Directory, MaxPcapDirectory))
	}
	return errs
}
