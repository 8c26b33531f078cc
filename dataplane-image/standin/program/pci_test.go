package program

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
	ps.Plan(eal, func(f string, a ...any) { lines = append(lines, strings.TrimSpace(fmt.Sprintf(f, a...))) })
	want := []string{"f-stack", "-c4", "-n4", "--proc-type=primary", "--vdev=net_null0", "--allow=0000:00:05.0", "--vdev=net_null1"}
	if got := ps.Apply(eal); !reflect.DeepEqual(got, want) {
		t.Errorf("apply:\n got %q\nwant %q (the vfio-pci device stays, so no --no-pci)", got, want)
	}
	if len(lines) != 2 ||
		!strings.Contains(lines[0], "stand-in: PCI 0000:00:04.0 cannot be probed here (bound to the kernel driver virtio-pci") ||
		!strings.Contains(lines[1], "stand-in: PCI 0000:00:1f.2 cannot be probed here (no such device") ||
		!strings.Contains(lines[1], "using net_null1 instead") || !strings.Contains(lines[1], "never the real image") {
		t.Errorf("log lines:\n%s", strings.Join(lines, "\n"))
	}

	only := []string{"f-stack", "-c4", "--allow=0000:00:1f.2"}
	ps.Plan(only, func(string, ...any) {})
	if got := ps.Apply(only); !reflect.DeepEqual(got, []string{"f-stack", "-c4", "--vdev=net_null0", "--no-pci"}) {
		t.Errorf("with every device replaced, DPDK must not probe the node's PCI devices: %q", got)
	}
	ps.Plan([]string{"f-stack", "--allow=0000:00:05.0"}, func(string, ...any) { t.Error("a probeable device was reported") })
}
