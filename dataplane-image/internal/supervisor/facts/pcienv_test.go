package facts

import (
	"reflect"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// A resource with '-' in it: the SR-IOV network device plugin keeps the '-' in the variable
// (it replaces only '.'), which the supervisor must find too; missing, both spellings are named.
func TestPCIResourceVariableAsTheDevicePluginSpellsIt(t *testing.T) {
	spec := &fsv1.StackInstanceSpec{Processes: 1, Ports: []fsv1.PortSpec{{Name: "vf",
		Device:     fsv1.PortDevice{PCI: &fsv1.PCIDevice{Resource: "my-nic.example/vf"}},
		Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.98.0.2/24", Gateway: "10.98.0.1"}}}}}
	h := newHarness(t, spec)
	_, err := h.facts().Gather(checked(t, spec))
	if err == nil || !strings.Contains(err.Error(), "PCIDEVICE_MY_NIC_EXAMPLE_VF (or PCIDEVICE_MY-NIC_EXAMPLE_VF) is not set") {
		t.Fatalf("want both spellings named, got %v", err)
	}
	h.env["PCIDEVICE_MY-NIC_EXAMPLE_VF"] = "0000:00:1f.2,0000:00:1f.3"
	facts, err := h.facts().Gather(checked(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	if got := facts.PCIResources["my-nic.example/vf"]; !reflect.DeepEqual(got, []string{"0000:00:1f.2", "0000:00:1f.3"}) {
		t.Fatalf("addresses %v", got)
	}
}
