package render_test

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// gen builds a StackInstance spec and pod facts from a byte stream, so the property test
// (random bytes, valid values only) and the fuzz target (any bytes, bad values too) share it.
type gen struct {
	data  []byte
	pos   int
	wild  bool // draw from the bad values as well
	spec  fsv1.StackInstanceSpec
	facts render.Facts
}

func (g *gen) byte() byte {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return b
}

func (g *gen) intn(n int) int { return int(g.byte()) % n }
func (g *gen) flip() bool     { return g.byte()&1 == 1 }

// pick returns a good value, or in wild mode sometimes a bad one.
func (g *gen) pick(good, bad []string) string {
	if g.wild && len(bad) > 0 && g.intn(8) == 0 {
		return bad[g.intn(len(bad))]
	}
	return good[g.intn(len(good))]
}

var badAddrs = []string{"", "10.0.0", "300.1.1.1", "10.0.0.1 ;x", "::1", "10.0.0.1/33", " 10.0.0.1", "abc"}

func (g *gen) build() {
	s := &g.spec
	s.FStackVersion = []fsv1.FStackVersion{fsv1.FStackV125, fsv1.FStackV124}[g.intn(2)]
	if g.wild && g.intn(16) == 0 {
		s.FStackVersion = "2.0"
	}
	s.Processes = g.processes()
	g.cpus(int(s.Processes))
	g.dpdk()
	vhost := g.flip()
	for i, n := 0, g.portCount(); i < n; i++ {
		g.port(i, vhost)
	}
	g.servePorts()
	g.vlans()
	g.kni()
	g.freebsd()
	g.rss()
	g.shim(vhost)
	if g.wild && g.intn(16) == 0 {
		// Past the CRD's bounds, as a pod's editor could write it into the annotation.
		s.Processes = []int32{-5, 0, 65, 1<<31 - 1}[g.intn(4)]
	}
	g.profile()
	g.lab()
}

// lab draws after the profile, for the same reason (no lab option once the bytes run out): now
// and then up to 8 lcores share each CPU, and the container has only the CPUs that needs, unless
// the CPUs' numbers would reach the ids the sharing lcores take (the renderer refuses that).
func (g *gen) lab() {
	s := &g.spec
	if g.intn(4) != 3 || s.Dataplane.Flavor == fsv1.FlavorUpstream || s.Processes < 1 || s.Processes > 64 {
		return
	}
	per := 2 + g.intn(7)
	n := int(s.Processes)
	m := min((n+per-1)/per, len(g.facts.DataplaneCPUs))
	if m == 0 || g.facts.DataplaneCPUs[m-1] >= 128-(n-m) {
		return
	}
	s.DPDK.LcoresPerCPU = int32(per)
	g.facts.DataplaneCPUs = g.facts.DataplaneCPUs[:m]
}

// profile draws last, so the inputs saved before profiles existed decode as they did (no
// profile once the bytes run out); it leaves some of its values to the profile.
func (g *gen) profile() {
	s := &g.spec
	s.Profile = []fsv1.Profile{"", fsv1.ProfileLongConnections, fsv1.ProfileShortConnections, fsv1.ProfileProxy}[g.intn(4)]
	if g.wild && g.intn(16) == 0 {
		s.Profile = "Fast"
	}
	if g.flip() {
		s.DPDK.PktTxDelayMicroseconds = nil
	}
	if s.RSSCheck != nil && g.flip() {
		s.RSSCheck.Enabled = nil
	}
}

func (g *gen) dpdk() {
	d := &g.spec.DPDK
	d.Channels = int32(1 + g.intn(8))
	d.PktTxDelayMicroseconds = new(int32(g.intn(101)))
	d.IdleSleepMicroseconds = int32(g.intn(3) * 50)
	d.TSO, d.SymmetricRSS, d.TxChecksumOffloadSkip = g.flip(), g.flip(), g.flip()
	d.Promiscuous, d.NUMA, d.VLANStrip = new(g.flip()), new(g.flip()), new(g.flip())
	if g.flip() {
		q := resource.MustParse(g.pick([]string{"256Mi", "512Mi", "1Gi"}, []string{"1500", "4Gi"}))
		d.Memory = &q
	}
	if g.intn(4) == 0 {
		d.BaseVirtAddr = "0x7f0000000000"
	}
	d.LogLevel = int32(g.intn(9))
	if g.wild && g.intn(8) == 0 {
		d.FilePrefix = "p"
	}
}

func (g *gen) port(i int, vhost bool) {
	name := fmt.Sprintf("p%d", i)
	p := fsv1.PortSpec{Name: name, Attachment: fmt.Sprintf("net%d", i+1)}
	switch {
	case vhost:
		p.Device.VhostUser = &fsv1.VhostUserDevice{}
		if g.flip() {
			p.Device.VhostUser.MAC = fmt.Sprintf("02:00:00:00:00:%02x", i)
		}
		if g.flip() {
			p.Device.VhostUser.QueueSize = int32(256 << g.intn(3))
		}
		g.attach(p.Attachment, fmt.Sprintf("/var/run/kube-fstack/vhost/%s.sock", p.Attachment))
		if a, ok := g.facts.Attachments[p.Attachment]; ok && p.Device.VhostUser.MAC != "" {
			// The network gave the attachment the spec's MAC (fstack-cni's "mac"): one MAC on
			// both sides, or the renderer refuses the port.
			a.MAC = p.Device.VhostUser.MAC
			g.facts.Attachments[p.Attachment] = a
		}
	case g.flip():
		res := "example.com/vf"
		p.Device.PCI = &fsv1.PCIDevice{Resource: res}
		g.facts.PCIResources = map[string][]string{res: append(g.facts.PCIResources[res], fmt.Sprintf("0000:5e:%02x.%d", 31-i, i%8))}
		g.attach(p.Attachment, "")
	default:
		p.Device.PCI = &fsv1.PCIDevice{Address: fmt.Sprintf("0000:%02x:00.0", 0x81-i)}
		g.attach(p.Attachment, "")
	}
	p.IPv4 = g.ipv4(i, vhost)
	if g.flip() {
		p.IPv6 = &fsv1.IPv6Address{From: fsv1.AddressStatic, Address: fmt.Sprintf("2001:db8:%x::10/64", i+1), Gateway: fmt.Sprintf("2001:db8:%x::1", i+1)}
	}
	if g.flip() {
		p.IfName = fmt.Sprintf("eth%d", i)
	}
	for v, n := 0, g.intn(70); v < n && (v < 64 || g.wild); v++ {
		p.VIPs = append(p.VIPs, fmt.Sprintf("172.%d.%d.%d", 16+i, v/250, 1+v%250))
	}
	if g.flip() {
		p.VIPs6 = []string{fmt.Sprintf("2001:db8:ff%x::1", i)}
		p.VIPPrefixLength = 128
	}
	g.spec.Ports = append(g.spec.Ports, p)
}

func (g *gen) ipv4(i int, vhost bool) *fsv1.IPv4Address {
	if g.flip() {
		if vhost {
			// Only fstack-cni's device info carries IPAM's address to the dataplane.
			return &fsv1.IPv4Address{From: fsv1.AddressAttachment}
		}
		return &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: fmt.Sprintf("10.%d.0.1", i),
			Pool: &fsv1.IPPool{Ranges: []string{fmt.Sprintf("10.%d.0.10-10.%d.0.50", i, i)}, PrefixLength: 24}}
	}
	return &fsv1.IPv4Address{
		From:    fsv1.AddressStatic,
		Address: g.pick([]string{fmt.Sprintf("10.%d.0.10/24", i), fmt.Sprintf("10.%d.0.10/16", i)}, badAddrs),
		Gateway: g.pick([]string{fmt.Sprintf("10.%d.0.1", i)}, badAddrs),
	}
}

func (g *gen) attach(name, sock string) {
	if g.facts.Attachments == nil {
		g.facts.Attachments = map[string]render.Attachment{}
	}
	if g.wild && g.intn(10) == 0 {
		return
	}
	n := len(g.facts.Attachments)
	g.facts.Attachments[name] = render.Attachment{SocketPath: sock, MAC: fmt.Sprintf("02:11:00:00:00:%02x", n),
		IPs: []string{fmt.Sprintf("10.200.%d.5/24", n)}, Gateways: []string{fmt.Sprintf("10.200.%d.1", n)}}
}

func (g *gen) vlans() {
	for v, n := 0, g.intn(4); v < n; v++ {
		g.spec.VLANs = append(g.spec.VLANs, fsv1.VLANSpec{
			ID: int32(100 + 10*v), Port: g.spec.Ports[0].Name,
			Addressing: fsv1.Addressing{
				IPv4: &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: fmt.Sprintf("10.100.%d.2/24", v), Gateway: fmt.Sprintf("10.100.%d.1", v)},
				VIPs: []string{fmt.Sprintf("100.64.%d.1", v)},
			},
		})
	}
}

func (g *gen) kni() {
	if g.intn(4) != 0 {
		return
	}
	k := &fsv1.KNISpec{Enabled: true, Method: fsv1.KNIReject, TCPPorts: []string{"80", "8000-8080"}, UDPPorts: []string{"53"}}
	if g.flip() {
		k.Method = fsv1.KNIAccept
	}
	if g.wild && g.intn(4) == 0 {
		k.Method = ""
	}
	k.Action = []fsv1.KNIAction{fsv1.KNIActionDefault, fsv1.KNIActionAllToKernel, fsv1.KNIActionAllToFStack}[g.intn(3)]
	g.spec.KNI = k
	for i := range g.spec.Ports {
		// The primary must serve every port.
		if ps := &g.spec.Ports[i]; ps.Processes != nil && !slices.Contains(ps.Processes, 0) {
			ps.Processes = append(ps.Processes, 0)
			if vu := ps.Device.VhostUser; vu != nil && vu.Queues != 0 && int(vu.Queues) < len(ps.Processes) {
				vu.Queues = int32(len(ps.Processes))
			}
		}
	}
}

func (g *gen) freebsd() {
	fb := &g.spec.FreeBSD
	if g.flip() {
		fb.TCBHashSize = new(int32(1024 << g.intn(6)))
		if g.wild && g.flip() {
			fb.TCBHashSize = new(int32(1000))
		}
	}
	if g.flip() {
		fb.MaxFiles = new(int32(1024 << g.intn(7)))
	}
	if g.flip() {
		fb.DelayedAck = new(g.flip())
	}
	if g.flip() {
		fb.SoMaxConn = new(int32(4096))
	}
	if g.flip() {
		fb.Sysctl = map[string]string{"net.inet.tcp.msl": g.pick([]string{"1000", "3000"}, []string{" 1", "a ;b", ""})}
	}
	if g.flip() {
		fb.Boot = map[string]string{"kern.ncallout": "131072"}
	}
}

func (g *gen) rss() {
	if g.spec.FStackVersion != fsv1.FStackV125 || g.intn(3) != 0 || g.spec.Ports[0].IPv4.From != fsv1.AddressStatic {
		return
	}
	local := g.spec.Ports[0].IPv4.Address
	if i := len(local) - 3; i > 0 {
		local = local[:i]
	}
	r := &fsv1.RSSCheckSpec{Enabled: new(true)}
	n := 1 + g.intn(16)
	if g.wild {
		n += g.intn(5)
	}
	for e := 0; e < n; e++ {
		r.Entries = append(r.Entries, fsv1.RSSCheckEntry{Port: g.spec.Ports[0].Name, LocalAddress: local,
			RemoteAddress: fmt.Sprintf("192.168.%d.%d", e/4, e%4+1), RemotePort: 80})
	}
	g.spec.RSSCheck = r
}

func (g *gen) shim(vhost bool) {
	sh := &g.spec.Shim
	sh.Enabled = new(g.intn(4) != 0)
	sh.KernelEvent = new(g.flip())
	sh.MultiSC = new(g.flip())
	sh.Polling = !*sh.KernelEvent && g.flip()
	if g.wild && g.intn(8) == 0 {
		sh.Polling = true
	}
	g.spec.Dataplane.Flavor = fsv1.FlavorKubeFStack
	if g.wild && vhost && g.flip() {
		g.spec.Dataplane.Flavor = fsv1.FlavorUpstream
	}
	if *sh.Enabled && *sh.KernelEvent && g.spec.FreeBSD.MaxFiles != nil && *g.spec.FreeBSD.MaxFiles > 65536 && !g.wild {
		g.spec.FreeBSD.MaxFiles = new(int32(65536))
	}
}
