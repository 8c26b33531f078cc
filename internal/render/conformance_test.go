package render_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fstackini"
)

// assertConforms reads ini with F-Stack's rules (package fstackini, which shares no code with the
// renderer) and checks every value against the spec and the facts, computing the expectations
// here from docs/fstack-rules.md, not from the renderer.
func assertConforms(t testing.TB, s *fsv1.StackInstanceSpec, f *render.Facts, ini []byte, res *render.Result) {
	t.Helper()
	c, err := fstackini.Parse(ini, fstackini.Version(s.FStackVersion))
	if err != nil {
		t.Fatalf("F-Stack would not accept the config: %v\n%s", err, ini)
	}
	ck := &checker{t: t, s: s, f: f, c: c}
	ck.lcoresAndDPDK()
	ids := ck.portIDs()
	ck.ports(ids)
	ck.vlans(ids)
	ck.rss(ids)
	ck.kni()
	ck.freebsd()
	ck.profile(res.Profile)
	patched := s.Dataplane.Flavor == fsv1.FlavorKubeFStack
	_, cpus := ck.wantLcores()
	env, set := "", false
	if s.DPDK.LcoresPerCPU > 1 {
		// The supervisor gives every process the whole list (docs/stackinstance.md, lab option).
		list := make([]string, len(cpus))
		for k, c := range cpus {
			list[k] = strconv.Itoa(c)
		}
		env, set = strings.Join(list, ","), true
		want := []render.EnvVar{{Name: "KUBE_FSTACK_LCORE_CPUS", Value: env}}
		if !reflect.DeepEqual(res.FStackEnv, want) {
			t.Errorf("F-Stack's environment: got %v, want %v", res.FStackEnv, want)
		}
	} else if res.FStackEnv != nil {
		t.Errorf("F-Stack's environment without lcoresPerCPU: got %v, want none", res.FStackEnv)
	}
	ck.eq("CPU of each process", res.CPUs, cpus)
	for k := range c.Lcores {
		if want := c.EALWithEnv(k, patched, env, set); !reflect.DeepEqual(res.EAL[k], want) {
			t.Errorf("EAL argv of process %d:\n got %q\nwant %q (built from the file as F-Stack does)", k, res.EAL[k], want)
		}
	}
}

// wantLcores is docs/stackinstance.md's lab option: process k runs on CPU k mod (the CPUs); the
// first process on each CPU has the CPU's number as lcore, the others the top ids below 128
// in process order.
func (ck *checker) wantLcores() (lcores, cpus []int) {
	n, dp := int(ck.s.Processes), ck.f.DataplaneCPUs
	m := min(n, len(dp))
	for k := 0; k < n; k++ {
		cpus = append(cpus, dp[k%m])
		if k < m {
			lcores = append(lcores, dp[k])
		} else {
			lcores = append(lcores, 128-(n-k))
		}
	}
	return lcores, cpus
}

type checker struct {
	t testing.TB
	s *fsv1.StackInstanceSpec
	f *render.Facts
	c *fstackini.Config
}

func (ck *checker) eq(what string, got, want any) {
	ck.t.Helper()
	if !reflect.DeepEqual(got, want) {
		ck.t.Errorf("%s: config has %v, spec says %v", what, got, want)
	}
}

func (ck *checker) lcoresAndDPDK() {
	s, c := ck.s, ck.c
	lcores, _ := ck.wantLcores()
	ck.eq("lcores", c.Lcores, lcores)
	d := c.DPDK
	ck.eq("channel", d["channel"], strconv.Itoa(int(s.DPDK.Channels)))
	ck.eq("pkt_tx_delay", d["pkt_tx_delay"], strconv.Itoa(int(*s.DPDK.PktTxDelayMicroseconds)))
	ck.eq("idle_sleep", d["idle_sleep"], strconv.Itoa(int(s.DPDK.IdleSleepMicroseconds)))
	ck.eq("promiscuous", d["promiscuous"], digit(*s.DPDK.Promiscuous))
	ck.eq("numa_on", d["numa_on"], digit(*s.DPDK.NUMA))
	ck.eq("vlan_strip", d["vlan_strip"], digit(*s.DPDK.VLANStrip))
	ck.eq("tso", d["tso"], digit(s.DPDK.TSO))
	ck.eq("tx_csum_offoad_skip", d["tx_csum_offoad_skip"], digit(s.DPDK.TxChecksumOffloadSkip))
	ck.eq("symmetric_rss", d["symmetric_rss"], digit(s.DPDK.SymmetricRSS))
	ck.eq("base_virtaddr", d["base_virtaddr"], s.DPDK.BaseVirtAddr)
	ck.eq("file_prefix", d["file_prefix"], s.DPDK.FilePrefix)
	if s.DPDK.Memory != nil {
		ck.eq("memory", d["memory"], strconv.FormatInt(s.DPDK.Memory.Value()>>20, 10))
	}
	if s.DPDK.LogLevel != 0 {
		ck.eq("log_level", d["log_level"], strconv.Itoa(int(s.DPDK.LogLevel)))
	}
	if s.Pcap != nil {
		ck.eq("pcap enable", c.Pcap["enable"], digit(s.Pcap.Enabled))
	}
}

// portIDs computes DPDK port ids as DPDK assigns them: vdevs in order, else PCI functions in
// address order followed by bonds.
func (ck *checker) portIDs() map[string]int {
	ids := map[string]int{}
	var bdfs []string
	used := map[string]int{}
	bdfOf := func(d *fsv1.PCIDevice) string {
		if d.Address != "" {
			return canonicalBDF(d.Address)
		}
		i := used[d.Resource]
		used[d.Resource]++
		return canonicalBDF(ck.f.PCIResources[d.Resource][i])
	}
	vdev, pciPorts, bonds := 0, map[string]string{}, []string{}
	for _, p := range ck.s.Ports {
		switch {
		case p.Device.VhostUser != nil:
			ids[p.Name] = vdev
			vdev++
		case p.Device.PCI != nil:
			pciPorts[p.Name] = bdfOf(p.Device.PCI)
			bdfs = append(bdfs, pciPorts[p.Name])
		default:
			for i := range p.Device.Bond.Members {
				bdfs = append(bdfs, bdfOf(&p.Device.Bond.Members[i]))
			}
			bonds = append(bonds, p.Name)
		}
	}
	sort.Strings(bdfs)
	for name, bdf := range pciPorts {
		ids[name] = sort.SearchStrings(bdfs, bdf)
	}
	for i, name := range bonds {
		ids[name] = len(bdfs) + i
	}
	allowKey := map[fsv1.FStackVersion]string{fsv1.FStackV125: "allow", fsv1.FStackV124: "pci_whitelist"}[ck.s.FStackVersion]
	ck.eq("PCI allow list", ck.c.DPDK[allowKey], strings.Join(bdfs, ","))
	ck.eq("nb_vdev", ck.c.NbVdev, vdev)
	ck.eq("nb_bond", ck.c.NbBond, len(bonds))
	return ids
}

func (ck *checker) ports(ids map[string]int) {
	var want []int
	for _, p := range ck.s.Ports {
		want = append(want, ids[p.Name])
	}
	sort.Ints(want)
	ck.eq("port_list", ck.c.PortList, want)
	for i := range ck.s.Ports {
		p := &ck.s.Ports[i]
		sec := ck.c.Ports[ids[p.Name]]
		where := fmt.Sprintf("port %s ([port%d])", p.Name, ids[p.Name])
		if sec == nil {
			ck.t.Errorf("%s: no section", where)
			continue
		}
		ck.eq(where+" lcore_list", sec.LcoreList, ck.lcoresOf(p.Processes))
		ck.eq(where+" if_name", sec.Keys["if_name"], p.IfName)
		ck.eq(where+" vip_ifname", sec.Keys["vip_ifname"], p.VIPInterface)
		att := ck.f.Attachments[p.Attachment]
		if p.IPv4 != nil {
			ck.ipv4(where, sec, p.IPv4, att)
		}
		ck.addressing(where, sec, &p.Addressing, att)
		if vu := p.Device.VhostUser; vu != nil {
			ck.vdev(where, ids[p.Name], vu, att, len(sec.LcoreList))
		}
	}
}

func (ck *checker) vdev(where string, id int, vu *fsv1.VhostUserDevice, att render.Attachment, procs int) {
	v := ck.c.Vdevs[id]
	path := att.SocketPath
	if att.Server {
		// F-Stack copies path verbatim into the devargs; ",server=1" makes the pod the server.
		path += ",server=1"
	}
	ck.eq(where+" vdev path", v["path"], path)
	q := int(vu.Queues)
	if q == 0 {
		q = procs
	}
	ck.eq(where+" vdev queues", v["queues"], strconv.Itoa(q))
	mac := vu.MAC
	if mac == "" {
		mac = att.MAC
	}
	ck.eq(where+" vdev mac", v["mac"], mac)
	if vu.QueueSize != 0 {
		ck.eq(where+" vdev queue_size", v["queue_size"], strconv.Itoa(int(vu.QueueSize)))
	}
}

func (ck *checker) lcoresOf(procs []int32) []int {
	var out []int
	lcores, _ := ck.wantLcores()
	for k := 0; k < int(ck.s.Processes); k++ {
		if len(procs) == 0 || contains32(procs, int32(k)) {
			out = append(out, lcores[k])
		}
	}
	return out
}

func (ck *checker) ipv4(where string, sec *fstackini.Iface, a *fsv1.IPv4Address, att render.Attachment) {
	cidr, gw := a.Address, a.Gateway
	if a.From == fsv1.AddressAttachment {
		cidr = first(att.IPs, true)
		if gw == "" {
			gw = first(att.Gateways, true)
		}
	}
	if a.From == fsv1.AddressPool {
		cidr = poolPlaceholder(a.Pool)
	}
	pfx := netip.MustParsePrefix(cidr)
	ck.eq(where+" addr", sec.Keys["addr"], pfx.Addr().String())
	mask := net4(^uint32(0) << (32 - pfx.Bits()))
	ck.eq(where+" netmask", sec.Keys["netmask"], mask)
	bcast := a.Broadcast
	if bcast == "" {
		b := pfx.Masked().Addr().As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		bcast = net4(v | ^(^uint32(0) << (32 - pfx.Bits())))
	}
	ck.eq(where+" broadcast", sec.Keys["broadcast"], bcast)
	ck.eq(where+" gateway", sec.Keys["gateway"], gw)
}

func (ck *checker) addressing(where string, sec *fstackini.Iface, a *fsv1.Addressing, att render.Attachment) {
	ck.eq(where+" vip_addr", sec.VIPs, nilIfEmpty(a.VIPs))
	ck.eq(where+" vip_addr6", sec.VIPs6, nilIfEmpty(a.VIPs6))
	if a.IPv6 != nil {
		cidr := a.IPv6.Address
		if a.IPv6.From == fsv1.AddressAttachment {
			cidr = first(att.IPs, false)
		}
		if a.IPv6.From == fsv1.AddressPool {
			cidr = poolPlaceholder(a.IPv6.Pool)
		}
		pfx := netip.MustParsePrefix(cidr)
		ck.eq(where+" addr6", sec.Keys["addr6"], pfx.Addr().String())
		ck.eq(where+" prefix_len", sec.Keys["prefix_len"], strconv.Itoa(pfx.Bits()))
	}
	if a.VIPPrefixLength != 0 {
		ck.eq(where+" vip_prefix_len", sec.Keys["vip_prefix_len"], strconv.Itoa(int(a.VIPPrefixLength)))
	}
	ck.eq(where+" ipfw_pr entries", len(sec.IPFW), len(a.PolicyRoutes))
}

func (ck *checker) vlans(ids map[string]int) {
	var want []int
	for _, v := range ck.s.VLANs {
		want = append(want, int(v.ID))
	}
	sort.Ints(want)
	ck.eq("vlan_filter", ck.c.VLANFilter, want)
	for i := range ck.s.VLANs {
		v := &ck.s.VLANs[i]
		sec := ck.c.VLANs[int(v.ID)]
		where := fmt.Sprintf("vlan %d", v.ID)
		if sec == nil {
			ck.t.Errorf("%s: no section", where)
			continue
		}
		ck.eq(where+" portid", sec.PortID, ids[v.Port])
		ck.ipv4(where, sec, v.IPv4, render.Attachment{})
		ck.addressing(where, sec, &v.Addressing, render.Attachment{})
	}
}

func (ck *checker) rss(ids map[string]int) {
	r := ck.s.RSSCheck
	if r == nil {
		ck.eq("[rss_check] present", ck.c.RSS, [][4]string(nil))
		return
	}
	ck.eq("rss enable", ck.c.RSSEnable, *r.Enabled)
	var want [][4]string
	for _, e := range r.Entries {
		want = append(want, [4]string{strconv.Itoa(ids[e.Port]), e.LocalAddress, e.RemoteAddress, strconv.Itoa(int(e.RemotePort))})
	}
	ck.eq("rss_tbl", ck.c.RSS, want)
}

func (ck *checker) kni() {
	k := ck.s.KNI
	if k == nil {
		ck.eq("[kni] present", ck.c.KNI, map[string]string(nil))
		return
	}
	ck.eq("kni enable", ck.c.KNI["enable"], digit(k.Enabled))
	ck.eq("kni method", ck.c.KNI["method"], strings.ToLower(string(k.Method)))
	ck.eq("kni tcp_port", ck.c.KNI["tcp_port"], strings.Join(k.TCPPorts, ","))
	ck.eq("kni udp_port", ck.c.KNI["udp_port"], strings.Join(k.UDPPorts, ","))
	action := map[fsv1.KNIAction]string{fsv1.KNIActionDefault: "default", fsv1.KNIActionAllToKernel: "alltokni", fsv1.KNIActionAllToFStack: "alltoff"}
	ck.eq("kni_action", ck.c.KNI["kni_action"], action[k.Action])
}

// profile: each value the profile reports in force is what F-Stack reads.
func (ck *checker) profile(vals []render.ProfileValue) {
	boot, sysctl := kvMap(ck.c.Boot), kvMap(ck.c.Sysctl)
	for _, v := range vals {
		if v.OverriddenBy != "" || v.Unused != "" {
			continue
		}
		what := "profile " + string(v.Profile) + " " + v.Section + " " + v.Key
		switch v.Section {
		case "dpdk":
			ck.eq(what, ck.c.DPDK[v.Key], v.Value)
		case "rss_check":
			ck.eq(what, ck.c.RSSEnable, v.Value == "1")
		case "freebsd.boot":
			ck.eq(what, boot[v.Key], v.Value)
		case "freebsd.sysctl":
			ck.eq(what, sysctl[v.Key], v.Value)
		default:
			ck.t.Errorf("%s: a section the checker does not know", what)
		}
	}
}

func (ck *checker) freebsd() {
	boot, sysctl := kvMap(ck.c.Boot), kvMap(ck.c.Sysctl)
	fb := &ck.s.FreeBSD
	for k, v := range fb.Boot {
		ck.eq("boot "+k, boot[k], v)
	}
	for k, v := range fb.Sysctl {
		ck.eq("sysctl "+k, sysctl[k], v)
	}
	opt := func(m map[string]string, key string, v *int32) {
		if v != nil {
			ck.eq(key, m[key], strconv.Itoa(int(*v)))
		}
	}
	optB := func(key string, v *bool) {
		if v != nil {
			ck.eq(key, sysctl[key], digit(*v))
		}
	}
	opt(boot, "hz", fb.HZ)
	opt(boot, "fd_reserve", fb.FDReserve)
	opt(boot, "kern.maxfiles", fb.MaxFiles)
	opt(boot, "net.inet.tcp.tcbhashsize", fb.TCBHashSize)
	opt(boot, "net.inet.tcp.syncache.hashsize", fb.SyncacheHashSize)
	opt(sysctl, "kern.ipc.somaxconn", fb.SoMaxConn)
	opt(sysctl, "net.inet.ip.portrange.randomtime", fb.PortRangeRandomTime)
	opt(sysctl, "net.inet.tcp.finwait2_timeout", fb.FinWait2TimeoutMilliseconds)
	opt(sysctl, "net.inet.tcp.maxtcptw", fb.MaxTCPTimeWait)
	optB("net.inet.tcp.delayed_ack", fb.DelayedAck)
	optB("net.inet.ip.portrange.randomized", fb.PortRangeRandomized)
	optB("net.inet.tcp.fast_finwait2_recycle", fb.FastFinWait2Recycle)
	if *ck.s.Shim.Enabled && *ck.s.Shim.KernelEvent && fb.MaxFiles == nil && fb.Boot["kern.maxfiles"] == "" {
		ck.eq("kern.maxfiles for the kernel-event shim", boot["kern.maxfiles"], "65536")
	}
	// F-Stack's shipped tuning stays unless overridden.
	if fb.HZ == nil && fb.Boot["hz"] == "" {
		ck.eq("shipped hz", boot["hz"], "100")
	}
	if fb.Sysctl["net.inet.tcp.sack.enable"] == "" {
		ck.eq("shipped sack", sysctl["net.inet.tcp.sack.enable"], "1")
	}
}

func kvMap(list []fstackini.KV) map[string]string {
	m := map[string]string{}
	for _, e := range list {
		m[e.Key] = e.Value
	}
	return m
}

func canonicalBDF(s string) string {
	s = strings.ToLower(s)
	if strings.Count(s, ":") == 1 {
		s = "0000:" + s
	}
	return s
}

func first(cidrs []string, v4 bool) string {
	for _, c := range cidrs {
		s := c
		if i := strings.IndexByte(c, '/'); i >= 0 {
			s = c[:i]
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() == v4 {
			return c
		}
	}
	return ""
}

func net4(v uint32) string {
	return fmt.Sprintf("%d.%d.%d.%d", v>>24, v>>16&0xff, v>>8&0xff, v&0xff)
}

func digit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func contains32(xs []int32, x int32) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func nilIfEmpty(xs []string) []string {
	if len(xs) == 0 {
		return nil
	}
	return xs
}

// poolPlaceholder is what a pool port renders with before a pod takes an address: the start of
// the pool's first entry, with the pool's prefix length.
func poolPlaceholder(p *fsv1.IPPool) string {
	start, _, _ := strings.Cut(p.Ranges[0], "-")
	return strings.TrimSpace(start) + "/" + strconv.Itoa(int(p.PrefixLength))
}
