package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/program"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// fakeSysfs is a PCI device directory with no device at all: every allowed address is one DPDK
// cannot probe here.
func fakeSysfs(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "devices")
	mustDo(t, os.MkdirAll(dir, 0o755))
	return dir
}

// Through the supervisor, in the stand-in's program mode (Launch.Programs, its Plan and Argv): the device plugin's address reaches config.ini as
// rendered, and only the program's argv carries the virtual device.
func TestStandinRunSaysItSubstitutes(t *testing.T) {
	f := false
	spec := &fsv1.StackInstanceSpec{Processes: 1, Shim: fsv1.ShimSpec{Enabled: &f},
		Ports: []fsv1.PortSpec{{Name: "vf", Device: fsv1.PortDevice{PCI: &fsv1.PCIDevice{Resource: "kubefstack.io/e2e_fake_vf"}},
			Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.98.0.2/24", Gateway: "10.98.0.1"}}}}}
	h := newHarness(t, spec)
	h.env["PCIDEVICE_KUBEFSTACK_IO_E2E_FAKE_VF"] = "0000:00:1f.2"
	s := h.supervisor("primary", "secondary")
	s.Cfg.Launch.Programs.(*program.Program).PCI = &program.PCIStandin{Driver: "net_null", SysfsDevices: fakeSysfs(t)}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := run(s, ctx)
	eventually(t, "the ready marker", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	stop()
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
