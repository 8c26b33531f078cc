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
	"strings"
	"syscall"

	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
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
	nodeConfig := flag.String("node-config", "", "the node config the fstack-cni builds read (built with plugin.NodeConfigLDFlag); required")
	var bases []base
	flag.Func("base", "label=dir: another build of fstack-cni (dir holds it and host-local) to measure in the same run; repeatable",
		func(v string) error {
			label, dir, ok := strings.Cut(v, "=")
			if !ok || label == "" || dir == "" {
				return fmt.Errorf("want label=dir, got %q", v)
			}
			bases = append(bases, base{label: label, bin: dir})
			return nil
		})
	flag.Parse()
	if *nodeConfig == "" {
		return fmt.Errorf("-node-config: required (the bench never writes the machine's)")
	}
	node, err := nodetest.StartNode("fskb-", "br-fstack", 0)
	if err != nil {
		return err
	}
	defer node.Close()
	tmp, ovs := node.Tmp, node.OVS
	run := filepath.Join(tmp, "run")
	if err := mountTmpfs(run); err != nil {
		return err
	}
	defer syscall.Unmount(run, 0) //nolint:errcheck // the bench's mount namespace goes with it anyway
	b := &bench{bin: *binDir, bases: bases, tmp: tmp, run: run, ovs: ovs, nodeConfig: *nodeConfig}
	if err := b.latency(*n); err != nil {
		return err
	}
	return b.faults(*cycles)
}

// mountTmpfs puts the files the plugins write where nodes have them: /var/run is a tmpfs. The
// bench runs in a mount namespace of its own (ip netns exec), so the host never sees it.
func mountTmpfs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m,mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs at %s: %w", dir, err)
	}
	return nil
}
