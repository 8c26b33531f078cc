package render_test

import (
	"slices"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// Two ports of one device-plugin resource, as the e2e suite's stack has them: the plugin's
// comma-separated addresses go to the ports in its order, the allow-list key is the version's
// (v1.24's pci_whitelist is silently ignored by v1.25, and the reverse), and DPDK numbers the
// ports in address order, which the renderer follows.
func TestResourceBackedPortsPerVersion(t *testing.T) {
	const res = "kubefstack.io/e2e_fake_vf"
	spec := func(v fsv1.FStackVersion) *fsv1.StackInstanceSpec {
		port := func(name, addr string) fsv1.PortSpec {
			return fsv1.PortSpec{Name: name, Device: fsv1.PortDevice{PCI: &fsv1.PCIDevice{Resource: res}},
				Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: addr, Gateway: strings.TrimSuffix(addr, "2/24") + "1"}}}
		}
		return &fsv1.StackInstanceSpec{Processes: 1, FStackVersion: v,
			Ports: []fsv1.PortSpec{port("a", "10.98.0.2/24"), port("b", "10.98.1.2/24")}}
	}
	facts := &render.Facts{DataplaneCPUs: []int{3}, PCIResources: map[string][]string{res: {"0000:00:1f.3", "0000:00:1f.2"}}}
	for v, key := range map[fsv1.FStackVersion]string{fsv1.FStackV125: "allow", fsv1.FStackV124: "pci_whitelist"} {
		out, err := render.RenderRaw(spec(v), facts)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		ini := string(out.Config)
		other := map[string]string{"allow": "pci_whitelist", "pci_whitelist": "allow"}[key]
		if !strings.Contains(ini, "\n"+key+"=0000:00:1f.2,0000:00:1f.3\n") || strings.Contains(ini, "\n"+other+"=") {
			t.Errorf("%s: want %s= with both addresses in DPDK's probe order and no %s=:\n%s", v, key, other, ini)
		}
		// Port a got the first address the plugin listed, 1f.3, which DPDK probes second.
		if out.PortIDs["a"] != 1 || out.PortIDs["b"] != 0 || !strings.Contains(ini, "[port1]\naddr=10.98.0.2\n") {
			t.Errorf("%s: port ids %v:\n%s", v, out.PortIDs, ini)
		}
		for _, a := range []string{"--allow=0000:00:1f.2", "--allow=0000:00:1f.3"} {
			if !slices.Contains(out.EAL[0], a) {
				t.Errorf("%s: EAL argv %q lacks %s", v, out.EAL[0], a)
			}
		}
	}
	// One address for two ports: the error names the variable and what to request.
	short := &render.Facts{DataplaneCPUs: []int{3}, PCIResources: map[string][]string{res: {"0000:00:1f.2"}}}
	_, err := render.RenderRaw(spec(fsv1.FStackV125), short)
	if err == nil || !strings.Contains(err.Error(), "spec.ports[1].device.pci.resource") ||
		!strings.Contains(err.Error(), "PCIDEVICE_KUBEFSTACK_IO_E2E_FAKE_VF") {
		t.Fatalf("want the second port's resource named with its variable, got %v", err)
	}
}

func TestPCIResourceEnvNames(t *testing.T) {
	for res, want := range map[string][]string{
		"intel.com/sriov_dpdk": {"PCIDEVICE_INTEL_COM_SRIOV_DPDK"},
		"my-nic.example/vf-a":  {"PCIDEVICE_MY_NIC_EXAMPLE_VF_A", "PCIDEVICE_MY-NIC_EXAMPLE_VF-A"},
	} {
		if got := render.PCIResourceEnvNames(res); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", res, got, want)
		}
	}
}
