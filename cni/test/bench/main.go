// Command bench measures fstack-cni on a private OVS-DPDK instance: ADD+DEL latency against
// the CNI reference bridge plugin and against the same port made by exec'ing ovs-vsctl (as
// userspace-cni does), all in one run, and a fault run that counts leaks. hack/bench-cni.sh
// builds the plugins and runs it; only the ratios mean something on a shared machine.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kube-fstack/kube-fstack/internal/nodetest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	binDir := flag.String("bin", "", "dir with fstack-cni, bridge and host-local")
	n := flag.Int("n", 100, "attachments per latency series")
	cycles := flag.Int("cycles", 1000, "ADD/DEL cycles of the fault run")
	flag.Parse()
	if err := nodetest.CheckPrereqs(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "fskb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	huge, err := nodetest.MountHugepages(filepath.Join(tmp, "huge"), nodetest.OVSPages)
	if err != nil {
		return err
	}
	defer huge.Unmount()
	ovs, err := nodetest.StartOVS(filepath.Join(tmp, "ovs"), "br-fstack", huge)
	if err != nil {
		return err
	}
	defer ovs.Stop()
	b := &bench{bin: *binDir, tmp: tmp, ovs: ovs}
	if err := b.latency(*n); err != nil {
		return err
	}
	return b.faults(*cycles)
}
