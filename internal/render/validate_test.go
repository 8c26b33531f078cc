package render_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// base is a valid two-process stack on one PCI port; each case breaks one thing.
func base() (*fsv1.StackInstanceSpec, *render.Facts) {
	s := &fsv1.StackInstanceSpec{
		Processes: 2,
		Ports: []fsv1.PortSpec{{
			Name:       "data",
			Device:     fsv1.PortDevice{PCI: &fsv1.PCIDevice{Address: "0000:3b:00.0"}},
			Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.0.0.10/24", Gateway: "10.0.0.1"}},
		}},
	}
	f := &render.Facts{DataplaneCPUs: []int{2, 3}, AppCPUs: []int{4},
		Attachments: map[string]render.Attachment{"net1": {SocketPath: "/var/run/kube-fstack/vhost/net1.sock"}}}
	return s, f
}

func vhostPort(s *fsv1.StackInstanceSpec) {
	s.Ports[0].Attachment = "net1"
	s.Ports[0].Device = fsv1.PortDevice{VhostUser: &fsv1.VhostUserDevice{}}
}

func TestValidationNamesFieldAndRemedy(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(*fsv1.StackInstanceSpec, *render.Facts)
		field     string
		mentions  string
		constrain string // the rule of docs/fstack-rules.md §4 it enforces
	}{
		{"too few CPUs", func(s *fsv1.StackInstanceSpec, f *render.Facts) { f.DataplaneCPUs = []int{2} },
			"spec.processes", "static CPU manager", "R1"},
		{"CPU beyond RTE_MAX_LCORE", func(s *fsv1.StackInstanceSpec, f *render.Facts) { f.DataplaneCPUs = []int{127, 128} },
			"spec.processes", "RTE_MAX_LCORE", "R1"},
		{"too few CPUs for lcores sharing them", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Processes, s.DPDK.LcoresPerCPU, s.Ports[0].Processes = 5, 2, nil
			f.DataplaneCPUs = []int{2, 3}
		}, "spec.processes", "3 exclusive CPUs", "R1"},
		{"shared lcores on an unpatched F-Stack", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.DPDK.LcoresPerCPU, s.Dataplane.Flavor = 2, fsv1.FlavorUpstream
			f.DataplaneCPUs = []int{2}
		}, "spec.dpdk.lcoresPerCPU", "patch 0003", "R1"},
		{"CPU number among the shared lcores' ids", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.DPDK.LcoresPerCPU = 2
			f.DataplaneCPUs = []int{127}
		}, "spec.dpdk.lcoresPerCPU", "lcore 127", "R1"},
		{"process serving no port", func(s *fsv1.StackInstanceSpec, f *render.Facts) { s.Ports[0].Processes = []int32{0} },
			"spec.ports", "process 1 serves no port", "R4"},
		{"65 VIPs", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			for i := 0; i < 65; i++ {
				s.Ports[0].VIPs = append(s.Ports[0].VIPs, fmt.Sprintf("172.16.0.%d", i+1))
			}
		}, "spec.ports[0].vips", "must have at most 64", "R11"},
		{"bad VIP", func(s *fsv1.StackInstanceSpec, f *render.Facts) { s.Ports[0].VIPs = []string{"1.1.1.1 ;2.2.2"} },
			"spec.ports[0].vips[0]", "IPv4", "R11"},
		{"vhost queues below processes", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			vhostPort(s)
			s.Ports[0].Device.VhostUser.Queues = 1
		}, "spec.ports[0].device.vhostUser.queues", "at least 2", "R5"},
		{"vhost and PCI mixed", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Ports = append(s.Ports, fsv1.PortSpec{Name: "v", Attachment: "net1", Device: fsv1.PortDevice{VhostUser: &fsv1.VhostUserDevice{}},
				Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.1.0.10/24", Gateway: "10.1.0.1"}}})
		}, "spec.ports[0].device", "--no-pci", "R7"},
		{"missing vhost socket", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			vhostPort(s)
			f.Attachments = nil
		}, "spec.ports[0].attachment", "fstack-cni", "R7"},
		{"KNI without method", func(s *fsv1.StackInstanceSpec, f *render.Facts) { s.KNI = &fsv1.KNISpec{Enabled: true} },
			"spec.kni.method", "method is required", "R20"},
		{"KNI primary not serving a port", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.KNI = &fsv1.KNISpec{Enabled: true, Method: fsv1.KNIReject}
			s.Ports[0].Processes = []int32{1}
		}, "spec.ports[0].processes", "primary", "R20"},
		{"tcbhashsize not a power of two", func(s *fsv1.StackInstanceSpec, f *render.Facts) { s.FreeBSD.TCBHashSize = new(int32(1000)) },
			"spec.freebsd.tcbHashSize", "power of two", "R16"},
		{"syncache hashsize in the map", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.FreeBSD.Boot = map[string]string{"net.inet.tcp.syncache.hashsize": "3000"}
		}, "spec.freebsd.boot[net.inet.tcp.syncache.hashsize]", "power of two", "R16"},
		{"maxfiles above 65536 with kernelEvent", func(s *fsv1.StackInstanceSpec, f *render.Facts) { s.FreeBSD.MaxFiles = new(int32(100000)) },
			"spec.freebsd.maxFiles", "at most 65536", "R14"},
		{"polling with kernelEvent", func(s *fsv1.StackInstanceSpec, f *render.Facts) { s.Shim.Polling = true },
			"spec.shim.polling", "kernelEvent", "R15"},
		{"file prefix with the shim", func(s *fsv1.StackInstanceSpec, f *render.Facts) { s.DPDK.FilePrefix = "a" },
			"spec.dpdk.filePrefix", "'rte'", "R8"},
		{"vhost with the shim on upstream F-Stack", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			vhostPort(s)
			s.Dataplane.Flavor = fsv1.FlavorUpstream
		}, "spec.dataplane.flavor", "prefix 'container'", "R8"},
		{"vhost with 2Mi pages on upstream F-Stack", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			vhostPort(s)
			s.Shim.Enabled = new(false)
			s.Dataplane.Flavor = fsv1.FlavorUpstream
			s.Dataplane.HugePages.PageSize = fsv1.HugePages2Mi
		}, "spec.dataplane.hugePages.pageSize", "8", "R29"},
		{"bond on v1.25", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Ports[0].Device = fsv1.PortDevice{Bond: &fsv1.BondDevice{Members: []fsv1.PCIDevice{{Address: "0000:3b:00.0"}, {Address: "0000:3b:00.1"}}}}
		}, "spec.ports[0].device.bond", "slave=", "R22"},
		{"bond with two processes", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.FStackVersion = fsv1.FStackV124
			s.Ports[0].Device = fsv1.PortDevice{Bond: &fsv1.BondDevice{Members: []fsv1.PCIDevice{{Address: "0000:3b:00.0"}}}}
		}, "spec.ports[0].device.bond", "single process", "R22"},
		{"rss_check on 1.24", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.FStackVersion = fsv1.FStackV124
			s.RSSCheck = &fsv1.RSSCheckSpec{Enabled: new(true), Entries: []fsv1.RSSCheckEntry{{Port: "data", LocalAddress: "10.0.0.10", RemoteAddress: "10.9.0.1", RemotePort: 80}}}
		}, "spec.rssCheck", "v1.25", "R26"},
		{"rss_check over 16 remote pairs", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.RSSCheck = &fsv1.RSSCheckSpec{Enabled: new(true)}
			for i := 0; i < 17; i++ {
				s.RSSCheck.Entries = append(s.RSSCheck.Entries, fsv1.RSSCheckEntry{Port: "data", LocalAddress: "10.0.0.10", RemoteAddress: fmt.Sprintf("10.9.0.%d", i+1), RemotePort: 80})
			}
		}, "spec.rssCheck.entries[16]", "16 distinct", "R12"},
		{"rss_check over 4 local addresses", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.RSSCheck = &fsv1.RSSCheckSpec{Enabled: new(true)}
			for i := 0; i < 5; i++ {
				s.Ports[0].VIPs = append(s.Ports[0].VIPs, fmt.Sprintf("172.16.0.%d", i+1))
				s.RSSCheck.Entries = append(s.RSSCheck.Entries, fsv1.RSSCheckEntry{Port: "data", LocalAddress: fmt.Sprintf("172.16.0.%d", i+1), RemoteAddress: "10.9.0.1", RemotePort: 80})
			}
		}, "spec.rssCheck.entries[4].localAddress", "at most 4", "R12"},
		{"rss_check local address not on the port", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.RSSCheck = &fsv1.RSSCheckSpec{Enabled: new(true), Entries: []fsv1.RSSCheckEntry{{Port: "data", LocalAddress: "10.7.7.7", RemoteAddress: "10.9.0.1", RemotePort: 80}}}
		}, "spec.rssCheck.entries[0].localAddress", "not an address of port data", "R12"},
		{"line over 2047 bytes", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			// 64 IPv6 VIPs written out in full: within the schema's bounds, 2560 bytes on one line.
			for i := range 64 {
				s.Ports[0].VIPs6 = append(s.Ports[0].VIPs6, fmt.Sprintf("2001:0db8:0000:0000:0000:0000:0000:%04x", i+1))
			}
		}, "spec.ports[0].vips6", "2047", "R13"},
		{"value with an inline comment", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.FreeBSD.Sysctl = map[string]string{"net.inet.tcp.msl": "1000 ;x"}
		}, "spec.freebsd.sysctl[net.inet.tcp.msl]", "comment", "R13"},
		{"more than 17 EAL arguments", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.DPDK.LogLevel, s.DPDK.BaseVirtAddr = 8, "0x7f0000000000"
			for i := 1; i < 14; i++ {
				s.Ports = append(s.Ports, fsv1.PortSpec{Name: fmt.Sprintf("p%d", i), Device: fsv1.PortDevice{PCI: &fsv1.PCIDevice{Address: fmt.Sprintf("0000:3c:00.%d", i%8)}},
					Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: fmt.Sprintf("10.%d.0.10/24", i), Gateway: fmt.Sprintf("10.%d.0.1", i)}}})
				s.Ports[i].Device.PCI.Address = fmt.Sprintf("0000:3c:%02x.0", i)
			}
		}, "spec.ports", "room for 17", "R9"},
		{"EAL argument over 255 bytes", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			vhostPort(s)
			f.Attachments["net1"] = render.Attachment{SocketPath: "/" + strings.Repeat("d", 250) + "/net1.sock"}
		}, "spec.ports", "255", "R9"},
		{"app CPU is an lcore", func(s *fsv1.StackInstanceSpec, f *render.Facts) { f.AppCPUs = []int{3} },
			"spec.shim", "distinct", "R19"},
		{"app CPU beyond the shim's mask", func(s *fsv1.StackInstanceSpec, f *render.Facts) { f.AppCPUs = []int{51} },
			"spec.shim", "0-50", "R19"},
		{"pcap path too long", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Pcap = &fsv1.PcapSpec{Enabled: true, Directory: "/" + strings.Repeat("p", 45)}
		}, "spec.pcap.directory", "", "R25"},
		{"noHuge with the shim", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Processes = 1
			s.DPDK.NoHuge = true
			q := resource.MustParse("512Mi")
			s.DPDK.Memory = &q
		}, "spec.dpdk.noHuge", "shim", "R27"},
		{"memory above hugepages", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			q := resource.MustParse("2Gi")
			s.DPDK.Memory = &q
		}, "spec.dpdk.memory", "hugepages", "§3.4"},
		{"SR-IOV resource not allocated", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Ports[0].Device.PCI = &fsv1.PCIDevice{Resource: "intel.com/vf"}
		}, "spec.ports[0].device.pci.resource", "PCIDEVICE_INTEL_COM_VF", "R2"},
		{"duplicate PCI address", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Ports = append(s.Ports, *s.Ports[0].DeepCopy())
			s.Ports[1].Name = "dup"
		}, "spec.ports[1].device.pci", "0000:3b:00.0", "R2"},
		{"no address on a port", func(s *fsv1.StackInstanceSpec, f *render.Facts) { s.Ports[0].IPv4 = nil },
			"spec.ports[0].ipv4", "gateway", "R3"},
		{"attachment without an address", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Ports[0].IPv4 = &fsv1.IPv4Address{From: fsv1.AddressAttachment}
		}, "spec.ports[0].ipv4.from", "IPAM", "R3"},
		{"sysctl that is a boot tunable", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.FreeBSD.Sysctl = map[string]string{"kern.maxfiles": "1024"}
		}, "spec.freebsd.sysctl[kern.maxfiles]", "spec.freebsd.boot", "§1.12"},
		{"typed field and map set the same key", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.FreeBSD.SoMaxConn = new(int32(1024))
			s.FreeBSD.Sysctl = map[string]string{"kern.ipc.somaxconn": "2048"}
		}, "spec.freebsd.sysctl[kern.ipc.somaxconn]", "spec.freebsd.soMaxConn", "§1.1 duplicates"},
		{"17 VLANs with gateways", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			for i := 0; i < 17; i++ {
				s.VLANs = append(s.VLANs, fsv1.VLANSpec{ID: int32(i + 1), Port: "data",
					Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: fmt.Sprintf("10.50.%d.2/24", i), Gateway: fmt.Sprintf("10.50.%d.1", i)}}})
			}
		}, "spec.vlans[16].ipv4.gateway", "routing tables", "R24"},
		{"two vhost-user ports on one attachment", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			vhostPort(s)
			s.Ports = append(s.Ports, fsv1.PortSpec{Name: "net1", Device: fsv1.PortDevice{VhostUser: &fsv1.VhostUserDevice{}},
				Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.1.0.10/24", Gateway: "10.1.0.1"}}})
		}, "spec.ports[1].attachment", "vhost-user ports data and net1 both use attachment net1", "R30"},
		{"multicast vhost-user MAC", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			vhostPort(s)
			s.Ports[0].Device.VhostUser.MAC = "03:00:00:00:00:01"
		}, "spec.ports[0].device.vhostUser.mac", "multicast", "R31"},
		{"two ports with one address", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Ports = append(s.Ports, fsv1.PortSpec{Name: "other", Device: fsv1.PortDevice{PCI: &fsv1.PCIDevice{Address: "0000:3b:00.1"}},
				Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.0.0.10/16", Gateway: "10.0.0.1"}}})
		}, "spec.ports[1].ipv4.address", "also the address of spec.ports[0].ipv4.address", "R32"},
		{"a VLAN with a port's IPv6 address, written otherwise", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Ports[0].IPv6 = &fsv1.IPv6Address{Address: "2001:db8::a/64"}
			s.VLANs = []fsv1.VLANSpec{{ID: 10, Port: "data", Addressing: fsv1.Addressing{
				IPv4: &fsv1.IPv4Address{Address: "10.9.0.2/24", Gateway: "10.9.0.1"},
				IPv6: &fsv1.IPv6Address{Address: "2001:DB8:0::A/64"}}}}
		}, "spec.vlans[0].ipv6.address", "also the address of spec.ports[0].ipv6.address", "R32"},
		{"a VIP that is its port's address", func(s *fsv1.StackInstanceSpec, f *render.Facts) {
			s.Ports[0].VIPs = []string{"172.16.0.1", "10.0.0.10"}
		}, "spec.ports[0].vips[1]", "is the address of spec.ports[0].ipv4.address", "R32"},
		{"unknown version", func(s *fsv1.StackInstanceSpec, f *render.Facts) { s.FStackVersion = "1.26" },
			"spec.fstackVersion", "v1.25", "R26"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, f := base()
			tc.mutate(s, f)
			before := s.DeepCopy()
			_, err := render.RenderRaw(s, f)
			var ve *render.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a ValidationError for %s (docs/fstack-rules.md §4 %s), got %v", tc.name, tc.constrain, err)
			}
			found := false
			for _, e := range ve.Errs {
				if e.Field == tc.field && strings.Contains(e.Error(), tc.mentions) {
					found = true
				}
			}
			if !found {
				t.Errorf("no error at %s mentioning %q; got:\n%v", tc.field, tc.mentions, err)
			}
			if s.Ports[0].Name != before.Ports[0].Name || len(s.Ports) != len(before.Ports) {
				t.Errorf("Render changed its input")
			}
		})
	}
}

func TestBaseIsValid(t *testing.T) {
	s, f := base()
	if _, err := render.RenderRaw(s, f); err != nil {
		t.Fatal(err)
	}
}

// TestAllErrorsAtOnce: a spec with several problems gets every one of them in one answer.
func TestAllErrorsAtOnce(t *testing.T) {
	s, f := base()
	s.FreeBSD.TCBHashSize = new(int32(1000))
	s.FreeBSD.MaxFiles = new(int32(100000))
	s.Ports[0].VIPs = []string{"nope"}
	_, err := render.RenderRaw(s, f)
	var ve *render.ValidationError
	if !errors.As(err, &ve) || len(ve.Errs) < 3 {
		t.Fatalf("want 3 errors at once, got %v", err)
	}
}

func TestValidateUsesPlaceholders(t *testing.T) {
	s, _ := base()
	s.Ports[0].Device.PCI = &fsv1.PCIDevice{Resource: "intel.com/vf"}
	s.Ports[0].IPv4 = &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: "10.0.0.1",
		Pool: &fsv1.IPPool{Ranges: []string{"10.0.0.10-10.0.0.20"}, PrefixLength: 24}}
	if errs := render.Validate(s); len(errs) != 0 {
		t.Fatalf("a spec whose facts come from the pod must validate before the pod exists: %v", errs)
	}
	s.Processes = 0
	s.Shim.Polling = true
	if errs := render.Validate(s); len(errs) == 0 {
		t.Fatal("Validate accepted polling with kernelEvent")
	}
}

// Two ports whose networks ask Multus for one interface would be admitted and then fail in
// every pod's sandbox; admission names the second port's attachment.
func TestTwoNetworksForOneInterfaceRefused(t *testing.T) {
	s, f := base()
	vhostPort(s)
	s.Ports[0].Network = &fsv1.NetworkRef{Name: "fstack-net"}
	second := s.Ports[0]
	second.Name = "data2"
	second.Network = &fsv1.NetworkRef{Name: "other-net"}
	second.Addressing = fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.1.0.10/24", Gateway: "10.1.0.1"}}
	s.Ports = append(s.Ports, second)
	_, err := render.RenderRaw(s, f)
	var ve *render.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a ValidationError, got %v", err)
	}
	for _, e := range ve.Errs {
		if e.Field == "spec.ports[1].attachment" && strings.Contains(e.Error(), "interface net1") {
			return
		}
	}
	t.Fatalf("no error at spec.ports[1].attachment naming interface net1; got:\n%v", err)
}

// TestEmptyPortNamesRefused: an rssCheck entry or a VLAN whose port is empty names no port, as
// the CRD's CEL rules say (no port is named ""). Found by FuzzDecodeSpec: the renderer's twins of
// those rules let "" through, and rendering the rss table then dereferenced the missing port.
func TestEmptyPortNamesRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*fsv1.StackInstanceSpec)
		field  string
	}{
		{"rssCheck entry", func(s *fsv1.StackInstanceSpec) {
			s.RSSCheck = &fsv1.RSSCheckSpec{Entries: []fsv1.RSSCheckEntry{{LocalAddress: "10.0.0.10", RemoteAddress: "10.0.1.10", RemotePort: 80}}}
		}, "spec.rssCheck.entries[0].port"},
		{"vlan", func(s *fsv1.StackInstanceSpec) {
			s.VLANs = []fsv1.VLANSpec{{ID: 10, Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.0.2.10/24"}}}}
		}, "spec.vlans[0].port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, f := base()
			tc.mutate(s)
			_, err := render.RenderRaw(s, f)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("want an error at %s, got %v", tc.field, err)
			}
		})
	}
}
