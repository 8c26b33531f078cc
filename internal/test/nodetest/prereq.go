// Package nodetest starts the real node components the CNI tests and benchmark run against: a
// private OVS-DPDK instance (its own run/db/log dirs, hugetlbfs mount and network namespace, so
// nothing of the host is touched), network namespaces and DPDK's testpmd.
package nodetest

import (
	"fmt"
	"os"
	"os/exec"
)

// installHint is what every missing prerequisite points to.
const installHint = "run hack/install-deps.sh (CI does), or: apt-get install --no-install-recommends openvswitch-switch-dpdk dpdk-dev librte-net-virtio23 librte-mempool-ring23 iproute2 iputils-ping"

// VswitchdDPDK is Debian's DPDK build of ovs-vswitchd; the default alternative is not it.
const VswitchdDPDK = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"

// CheckPrereqs says what is missing to run the node tests, and how to get it.
func CheckPrereqs() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("node tests need root (OVS-DPDK, hugepages, network namespaces)")
	}
	for _, bin := range []string{"ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl", VswitchdDPDK, "dpdk-testpmd", "ip", "ping", "unshare", "nsenter", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found: %s", bin, installHint)
		}
	}
	if _, err := os.Stat("/usr/share/openvswitch/vswitch.ovsschema"); err != nil {
		return fmt.Errorf("OVS schema missing: %s", installHint)
	}
	return nil
}
