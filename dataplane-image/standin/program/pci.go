package program

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PCIStandin is the stand-in image's answer to PCI devices DPDK cannot probe where it runs: a
// device plugin of the tests hands out addresses of no real device (no VF exists here), and
// DPDK's program would then start with no port at all. Each such --allow=<address> of the EAL
// argv becomes a virtual device of Driver instead, and the supervisor says so in its log.
// Program mode only (the stand-in's --standin-pci-vdev needs --program-mode): F-Stack reads
// config.ini, where the address stays as rendered, and the real image's supervisor has no such
// code at all.
type PCIStandin struct {
	// Driver is the DPDK virtual driver that replaces the device, e.g. net_null.
	Driver string
	// SysfsDevices is the kernel's PCI device directory (/sys/bus/pci/devices).
	SysfsDevices string

	subs map[string]string // address -> the vdev name that replaces it, decided per start
}

// dpdkPCIDrivers are the kernel drivers through which DPDK's PCI bus drives a device.
var dpdkPCIDrivers = []string{"vfio-pci", "uio_pci_generic", "igb_uio"}

// Plan decides, once per start, which allowed addresses of the primary's EAL argv are replaced,
// and logs one line for each.
func (ps *PCIStandin) Plan(eal []string, logf func(string, ...any)) {
	ps.subs = map[string]string{}
	for _, a := range eal {
		bdf, ok := strings.CutPrefix(a, "--allow=")
		if !ok {
			continue
		}
		why := ps.unprobeable(bdf)
		if why == "" {
			continue
		}
		vdev := fmt.Sprintf("%s%d", ps.Driver, len(ps.subs))
		ps.subs[bdf] = vdev
		logf("stand-in: PCI %s cannot be probed here (%s; a fake address, as a test device plugin hands out, or a device not bound for DPDK); using %s instead. config.ini keeps allow=%s; only the stand-in substitutes, never the real image",
			bdf, why, vdev, bdf)
	}
}

// unprobeable says why DPDK cannot drive the device at bdf here, or "" when it can.
func (ps *PCIStandin) unprobeable(bdf string) string {
	dev := filepath.Join(ps.SysfsDevices, bdf)
	if _, err := os.Stat(dev); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "no such device: " + dev + " does not exist"
		}
		return err.Error()
	}
	drv, err := os.Readlink(filepath.Join(dev, "driver"))
	if err != nil {
		return "bound to no driver"
	}
	if name := filepath.Base(drv); !slices.Contains(dpdkPCIDrivers, name) {
		return "bound to the kernel driver " + name + ", not " + strings.Join(dpdkPCIDrivers, "/")
	}
	return ""
}

// Apply rewrites one process's EAL argv: a replaced --allow becomes --vdev=<name>, and with no
// --allow left, --no-pci keeps DPDK from probing every PCI device of the node instead.
func (ps *PCIStandin) Apply(eal []string) []string {
	if len(ps.subs) == 0 {
		return eal
	}
	out := make([]string, 0, len(eal)+1)
	allows := 0
	for _, a := range eal {
		if bdf, ok := strings.CutPrefix(a, "--allow="); ok {
			if vdev, sub := ps.subs[bdf]; sub {
				a = "--vdev=" + vdev
			} else {
				allows++
			}
		}
		out = append(out, a)
	}
	if allows == 0 && !slices.Contains(out, "--no-pci") {
		out = append(out, "--no-pci")
	}
	return out
}
