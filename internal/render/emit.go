package render

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// emit writes config.ini in the order F-Stack's handlers need: [dpdk] (lcore_mask, port_list,
// nb_vdev, nb_bond and vlan_filter before any section that depends on them), then vdevs and
// bonds, ports, VLANs after their ports, [rss_check] after the ports, [kni], FreeBSD.
func (p *plan) emit(boot, sysctl []kv) ([]byte, field.ErrorList) {
	w := newINIWriter()
	p.emitDPDK(w)
	p.emitPcap(w)
	p.emitVdevs(w)
	p.emitBonds(w)
	p.emitPorts(w)
	p.emitVLANs(w)
	errs := p.emitRSS(w)
	p.emitKNI(w)
	emitKVs(w, "freebsd.boot", boot, field.NewPath("spec", "freebsd", "boot"))
	emitKVs(w, "freebsd.sysctl", sysctl, field.NewPath("spec", "freebsd", "sysctl"))
	return w.Bytes(), append(errs, w.errs...)
}

func (p *plan) emitDPDK(w *iniWriter) {
	s, d := p.spec, &p.spec.DPDK
	path := field.NewPath("spec", "dpdk")
	w.Section("dpdk")
	w.Key("lcore_mask", p.lcoreMask(), field.NewPath("spec", "processes"))
	w.Int("channel", int64(d.Channels), path.Child("channels"))
	if d.Memory != nil {
		mib, _ := wholeMiB(d.Memory)
		w.Int("memory", mib, path.Child("memory"))
	}
	if d.NoHuge {
		w.Bool("no_huge", true, path.Child("noHuge"))
	}
	if d.BaseVirtAddr != "" {
		w.Key("base_virtaddr", d.BaseVirtAddr, path.Child("baseVirtAddr"))
	}
	if d.FilePrefix != "" {
		w.Key("file_prefix", d.FilePrefix, path.Child("filePrefix"))
	}
	if len(p.allow) > 0 {
		w.Key(allowKey(s.FStackVersion), strings.Join(p.allow, ","), field.NewPath("spec", "ports"))
	}
	w.Bool("promiscuous", *d.Promiscuous, path.Child("promiscuous"))
	w.Bool("numa_on", *d.NUMA, path.Child("numa"))
	w.Bool("tx_csum_offoad_skip", d.TxChecksumOffloadSkip, path.Child("txChecksumOffloadSkip"))
	w.Bool("tso", d.TSO, path.Child("tso"))
	w.Bool("vlan_strip", *d.VLANStrip, path.Child("vlanStrip"))
	w.Int("idle_sleep", int64(d.IdleSleepMicroseconds), path.Child("idleSleepMicroseconds"))
	w.Int("pkt_tx_delay", int64(*d.PktTxDelayMicroseconds), path.Child("pktTxDelayMicroseconds"))
	w.Bool("symmetric_rss", d.SymmetricRSS, path.Child("symmetricRSS"))
	if d.LogLevel != 0 {
		w.Int("log_level", int64(d.LogLevel), path.Child("logLevel"))
	}
	if d.FStackLogLevel != 0 {
		w.Int("fstack_log_level", int64(d.FStackLogLevel), path.Child("fstackLogLevel"))
	}
	if d.FStackLogFilePrefix != "" {
		w.Key("fstack_log_file_prefix", d.FStackLogFilePrefix, path.Child("fstackLogFilePrefix"))
	}
	w.Key("port_list", intList(p.portIDs()), field.NewPath("spec", "ports"))
	w.Int("nb_vdev", int64(len(p.vdevs)), field.NewPath("spec", "ports"))
	w.Int("nb_bond", int64(len(p.bonds)), field.NewPath("spec", "ports"))
	if len(p.vlans) > 0 {
		ids := make([]int, len(p.vlans))
		for i, v := range p.vlans {
			ids[i] = int(v.spec.ID)
		}
		w.Key("vlan_filter", intList(ids), field.NewPath("spec", "vlans"))
	}
}

// allowKey is the name of the PCI allow-list key: renamed in v1.25, and the wrong name is
// silently ignored (every PCI device is then probed).
func allowKey(v fsv1.FStackVersion) string {
	if v == fsv1.FStackV124 {
		return "pci_whitelist"
	}
	return "allow"
}

func (p *plan) emitPcap(w *iniWriter) {
	pc := p.spec.Pcap
	if pc == nil {
		return
	}
	path := field.NewPath("spec", "pcap")
	w.Section("pcap")
	w.Bool("enable", pc.Enabled, path.Child("enabled"))
	snap := int64(96)
	if pc.SnapLength != 0 {
		snap = int64(pc.SnapLength)
	}
	w.Int("snaplen", snap, path.Child("snapLength"))
	size := int64(16 << 20)
	if pc.FileSize != nil {
		size = pc.FileSize.Value()
	}
	w.Int("savelen", size, path.Child("fileSize"))
	dir := pc.Directory
	if dir == "" {
		dir = "."
	}
	w.Key("savepath", dir, path.Child("directory"))
}

func (p *plan) emitVdevs(w *iniWriter) {
	for i, v := range p.vdevs {
		w.Section(fmt.Sprintf("vdev%d", i))
		w.Key("path", v.path, v.attachmentField)
		if q := p.vdevQueues(i); q != 0 {
			w.Int("queues", int64(q), v.pathField.Child("queues"))
		}
		if v.qsize != 0 {
			w.Int("queue_size", int64(v.qsize), v.pathField.Child("queueSize"))
		}
		if v.mac != "" {
			w.Key("mac", v.mac, v.pathField.Child("mac"))
		}
		if v.cq {
			w.Bool("cq", true, v.pathField.Child("controlQueue"))
		}
	}
}

// vdevQueues is the explicit queue count or, by default, one queue pair per serving process.
func (p *plan) vdevQueues(vdev int) int32 {
	if q := p.vdevs[vdev].queues; q != 0 {
		return q
	}
	for i := range p.ports {
		if p.ports[i].spec.Device.VhostUser != nil && p.ports[i].id == vdev {
			return int32(len(p.ports[i].lcores))
		}
	}
	return 0
}

func (p *plan) emitBonds(w *iniWriter) {
	for i, b := range p.bonds {
		w.Section(fmt.Sprintf("bond%d", i))
		w.Int("mode", int64(b.spec.Mode), b.path.Child("mode"))
		// F-Stack copies this value verbatim after "slave=", so further members carry their own key.
		w.Key("slave", strings.Join(b.members, ",slave="), b.path.Child("members"))
		if b.spec.PrimaryMember != nil && int(*b.spec.PrimaryMember) < len(b.members) {
			w.Key("primary", b.members[*b.spec.PrimaryMember], b.path.Child("primaryMember"))
		}
		if b.spec.SocketID != 0 {
			w.Int("socket_id", int64(b.spec.SocketID), b.path.Child("socketID"))
		}
		if b.spec.MAC != "" {
			w.Key("mac", b.spec.MAC, b.path.Child("mac"))
		}
		if b.spec.XmitPolicy != "" {
			w.Key("xmit_policy", b.spec.XmitPolicy, b.path.Child("xmitPolicy"))
		}
	}
}

func (p *plan) emitPorts(w *iniWriter) {
	for _, pp := range p.portsByID() {
		w.Section(fmt.Sprintf("port%d", pp.id))
		v4 := pp.v4
		if v4 == nil {
			v4 = p.firstVLANv4(pp.spec.Name)
		}
		if v4 != nil {
			emitV4(w, v4, pp.path.Child("ipv4"))
		}
		if pp.spec.IfName != "" {
			w.Key("if_name", pp.spec.IfName, pp.path.Child("ifName"))
		}
		w.Key("lcore_list", intList(pp.lcores), pp.path.Child("processes"))
		if len(pp.slaves) > 0 {
			w.Key("slave_port_list", intList(pp.slaves), pp.path.Child("device", "bond", "members"))
		}
		if pp.spec.VIPInterface != "" {
			w.Key("vip_ifname", pp.spec.VIPInterface, pp.path.Child("vipInterface"))
		}
		emitAddressing(w, &pp.spec.Addressing, pp.v6, pp.path)
	}
}

func (p *plan) emitVLANs(w *iniWriter) {
	for _, v := range p.vlans {
		w.Section(fmt.Sprintf("vlan%d", v.spec.ID))
		w.Int("portid", int64(v.portID), v.path.Child("port"))
		if v.v4 != nil {
			emitV4(w, v.v4, v.path.Child("ipv4"))
		}
		emitAddressing(w, &v.spec.Addressing, v.v6, v.path)
	}
}

func emitV4(w *iniWriter, v *ipv4Plan, path *field.Path) {
	w.Key("addr", v.addr, path.Child("address"))
	w.Key("netmask", v.netmask, path.Child("address"))
	w.Key("broadcast", v.broadcast, path.Child("broadcast"))
	w.Key("gateway", v.gateway, path.Child("gateway"))
}

// emitAddressing writes the keys ports and VLANs share, in one place so both stay alike.
func emitAddressing(w *iniWriter, a *fsv1.Addressing, v6 *ipv6Plan, path *field.Path) {
	if len(a.VIPs) > 0 {
		w.Key("vip_addr", strings.Join(a.VIPs, ";"), path.Child("vips"))
	}
	if len(a.PolicyRoutes) > 0 {
		w.Key("ipfw_pr", policyRoutes(a.PolicyRoutes), path.Child("policyRoutes"))
	}
	if v6 != nil {
		w.Key("addr6", v6.addr, path.Child("ipv6", "address"))
		w.Int("prefix_len", int64(v6.prefix), path.Child("ipv6", "address"))
		if v6.gateway != "" {
			w.Key("gateway6", v6.gateway, path.Child("ipv6", "gateway"))
		}
	}
	if len(a.VIPs6) > 0 {
		w.Key("vip_addr6", strings.Join(a.VIPs6, ";"), path.Child("vips6"))
	}
	if a.VIPPrefixLength != 0 {
		w.Int("vip_prefix_len", int64(a.VIPPrefixLength), path.Child("vipPrefixLength"))
	}
}

func policyRoutes(cidrs []string) string {
	parts := make([]string, 0, len(cidrs))
	for _, c := range cidrs {
		if pfx, err := parsePrefix4(c); err == nil {
			parts = append(parts, pfx.Masked().Addr().String()+" "+netmask4(pfx.Bits()))
		}
	}
	return strings.Join(parts, ";")
}

func (p *plan) emitRSS(w *iniWriter) field.ErrorList {
	r := p.spec.RSSCheck
	if r == nil {
		return nil
	}
	path := field.NewPath("spec", "rssCheck")
	w.Section("rss_check")
	w.Bool("enable", *r.Enabled, path.Child("enabled"))
	if len(r.Entries) == 0 {
		return nil
	}
	tbl, errs := p.rssTable()
	w.Key("rss_tbl", tbl, path.Child("entries"))
	return errs
}

func (p *plan) emitKNI(w *iniWriter) {
	k := p.spec.KNI
	if k == nil {
		return
	}
	path := field.NewPath("spec", "kni")
	w.Section("kni")
	w.Bool("enable", k.Enabled, path.Child("enabled"))
	if k.Method != "" {
		w.Key("method", strings.ToLower(string(k.Method)), path.Child("method"))
	}
	if len(k.TCPPorts) > 0 {
		w.Key("tcp_port", strings.Join(k.TCPPorts, ","), path.Child("tcpPorts"))
	}
	if len(k.UDPPorts) > 0 {
		w.Key("udp_port", strings.Join(k.UDPPorts, ","), path.Child("udpPorts"))
	}
	w.Key("kni_action", kniAction(k.Action), path.Child("action"))
	w.Int("console_packets_ratelimit", int64(k.ConsolePacketsRateLimit), path.Child("consolePacketsRateLimit"))
	w.Int("general_packets_ratelimit", int64(k.GeneralPacketsRateLimit), path.Child("generalPacketsRateLimit"))
	w.Int("kernel_packets_ratelimit", int64(k.KernelPacketsRateLimit), path.Child("kernelPacketsRateLimit"))
	if p.spec.FStackVersion == fsv1.FStackV124 {
		// 1.24 needs type=1 for the virtio_user exception path; v1.25 has no other.
		w.Int("type", 1, field.NewPath("spec", "fstackVersion"))
	}
}

func kniAction(a fsv1.KNIAction) string {
	switch a {
	case fsv1.KNIActionAllToKernel:
		return "alltokni"
	case fsv1.KNIActionAllToFStack:
		return "alltoff"
	}
	return "default"
}

func emitKVs(w *iniWriter, section string, list []kv, base *field.Path) {
	w.Section(section)
	for _, e := range list {
		path := e.path
		if path == nil {
			path = base.Key(e.key)
		}
		w.Key(e.key, e.value, path)
	}
}

// lcoreMask is the hex mask of every process's lcore; bit i is lcore (= CPU) i.
func (p *plan) lcoreMask() string {
	return hexMask(p.lcores)
}

func hexMask(bits []int) string {
	words := make([]uint64, maxLcore/64)
	for _, c := range bits {
		words[c/64] |= 1 << (c % 64)
	}
	var b strings.Builder
	started := false
	for i := len(words) - 1; i >= 0; i-- {
		switch {
		case started:
			fmt.Fprintf(&b, "%016x", words[i])
		case words[i] != 0 || i == 0:
			b.WriteString(strconv.FormatUint(words[i], 16))
			started = true
		}
	}
	return b.String()
}

// portIDsByName maps each port's name to its DPDK port id.
func (p *plan) portIDsByName() map[string]int {
	ids := make(map[string]int, len(p.ports))
	for _, pp := range p.ports {
		ids[pp.spec.Name] = pp.id
	}
	return ids
}

func (p *plan) portIDs() []int {
	ids := make([]int, 0, len(p.ports))
	for _, pp := range p.portsByID() {
		ids = append(ids, pp.id)
	}
	return ids
}

func (p *plan) portsByID() []*portPlan {
	out := make([]*portPlan, len(p.ports))
	for i := range p.ports {
		out[i] = &p.ports[i]
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].id < out[b].id })
	return out
}

func (p *plan) firstVLANv4(port string) *ipv4Plan {
	for _, v := range p.vlans {
		if v.spec.Port == port && v.v4 != nil {
			return v.v4
		}
	}
	return nil
}

// intList writes a list in F-Stack's syntax, folding runs into ranges ("0-3,5").
func intList(xs []int) string {
	var b strings.Builder
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(xs[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(xs[j]))
		}
		i = j + 1
	}
	return b.String()
}
