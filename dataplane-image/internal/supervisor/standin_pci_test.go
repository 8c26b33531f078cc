package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// fakeSysfs is /sys/bus/pci/devices with a device bound to vfio-pci and one bound to a kernel
// driver (links as the kernel makes them: devices/<bdf>/driver -> .../drivers/<name>).
func fakeSysfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for bdf, drv := range map[string]string{"0000:00:05.0": "vfio-pci", "0000:00:04.0": "virtio-pci"} {
		mustDo(t, os.MkdirAll(filepath.Join(root, "devices", bdf), 0o755))
		mustDo(t, os.Symlink("../../drivers/"+drv, filepath.Join(root, "devices", bdf, "driver")))
	}
	return filepath.Join(root, "devices")
}

func TestPCIStandinReplacesOnlyWhatDPDKCannotProbe(t *testing.T) {
	sysfs := fakeSysfs(t)
	eal := []string{"f-stack", "-c4", "-n4", "--proc-type=primary", "--allow=0000:00:04.0", "--allow=0000:00:05.0", "--allow=0000:00:1f.2"}
	ps := &PCIStandin{Driver: "net_null", SysfsDevices: sysfs}
	var lines []string
	ps.plan(eal, func(f string, a ...any) { lines = append(lines, strings.TrimSpace(fmt.Sprintf(f, a...))) })
	want := []string{"f-stack", "-c4", "-n4", "--proc-type=primary", "--vdev=net_null0", "--allow=0000:00:05.0", "--vdev=net_null1"}
	if got := ps.apply(eal); !reflect.DeepEqual(got, want) {
		t.Errorf("apply:\n got %q\nwant %q (the vfio-pci device stays, so no --no-pci)", got, want)
	}
	if len(lines) != 2 ||
		!strings.Contains(lines[0], "stand-in: PCI 0000:00:04.0 cannot be probed here (bound to the kernel driver virtio-pci") ||
		!strings.Contains(lines[1], "stand-in: PCI 0000:00:1f.2 cannot be probed here (no such device") ||
		!strings.Contains(lines[1], "using net_null1 instead") || !strings.Contains(lines[1], "never the real image") {
		t.Errorf("log lines:\n%s", strings.Join(lines, "\n"))
	}

	only := []string{"f-stack", "-c4", "--allow=0000:00:1f.2"}
	ps.plan(only, func(string, ...any) {})
	if got := ps.apply(only); !reflect.DeepEqual(got, []string{"f-stack", "-c4", "--vdev=net_null0", "--no-pci"}) {
		t.Errorf("with every device replaced, DPDK must not probe the node's PCI devices: %q", got)
	}
	ps.plan([]string{"f-stack", "--allow=0000:00:05.0"}, func(string, ...any) { t.Error("a probeable device was reported") })
}

// Through the supervisor, in program mode: the device plugin's address reaches config.ini as
// rendered, and only the program's argv carries the virtual device.
func TestStandinRunSaysItSubstitutes(t *testing.T) {
	f := false
	spec := &fsv1.StackInstanceSpec{Processes: 1, Shim: fsv1.ShimSpec{Enabled: &f},
		Ports: []fsv1.PortSpec{{Name: "vf", Device: fsv1.PortDevice{PCI: &fsv1.PCIDevice{Resource: "kubefstack.io/e2e_fake_vf"}},
			Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.98.0.2/24", Gateway: "10.98.0.1"}}}}}
	h := newHarness(t, spec)
	h.env["PCIDEVICE_KUBEFSTACK_IO_E2E_FAKE_VF"] = "0000:00:1f.2"
	s := h.supervisor("primary", "secondary")
	s.Cfg.Launch.PCIStandin = &PCIStandin{Driver: "net_null", SysfsDevices: fakeSysfs(t)}
	stop := make(chan struct{})
	res := run(s, stop)
	eventually(t, "the ready marker", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	close(stop)
	if err := waitResult(t, res); err != nil {
		t.Fatal(err)
	}
	log := h.log.String()
	if !strings.Contains(log, "stand-in: PCI 0000:00:1f.2 cannot be probed here") || !strings.Contains(log, "--vdev=net_null0") ||
		strings.Contains(log, "--allow=0000:00:1f.2") {
		t.Errorf("the log must say what replaced the device, and the program must not get it:\n%s", log)
	}
	if cfg, _ := os.ReadFile(h.paths.ConfigFile); !strings.Contains(string(cfg), "\nallow=0000:00:1f.2\n") {
		t.Errorf("config.ini must keep the device plugin's address:\n%s", cfg)
	}
}
