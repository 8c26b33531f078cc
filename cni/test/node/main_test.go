// Package node holds the node tier of the CNI tests. What is real: ovsdb-server and the DPDK
// ovs-vswitchd (Debian's openvswitch-switch-dpdk, a private instance), hugepages, network
// namespaces, the fstack-cni and host-local binaries exec'd by libcni as a runtime would, and
// DPDK's testpmd for the data path. The one fake is a socket proxy in front of OVSDB that cuts
// a connection mid-ADD: killing the real server at an exact step cannot be timed reliably.
package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kube-fstack/kube-fstack/cni/internal/plugin"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

const bridge = "br-fstack"

// env is the node every test uses; starting OVS-DPDK once per package keeps the tier short.
var env struct {
	tmp    string
	binDir string
	// nodeConfig is the node config the test build of fstack-cni reads.
	nodeConfig string
	ovs        *nodetest.OVS
	huge       *nodetest.Hugepages
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node test setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	node, err := nodetest.StartNode("fsk-", bridge, testpmdPages)
	if err != nil {
		return 0, err
	}
	defer node.Close()
	env.tmp, env.huge, env.ovs = node.Tmp, node.Huge, node.OVS
	if err := buildPlugins(env.tmp); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// buildPlugins builds the binaries the runtime execs: ours, and host-local for IPAM.
func buildPlugins(tmp string) error {
	env.binDir = filepath.Join(tmp, "bin")
	// The test's node config, not the machine's /etc/kube-fstack/cni.json.
	env.nodeConfig = filepath.Join(tmp, "etc-kube-fstack", "cni.json")
	build := exec.Command("go", "build", "-ldflags", plugin.NodeConfigLDFlag(env.nodeConfig), "-o", env.binDir+"/", "github.com/kube-fstack/kube-fstack/cni/cmd/fstack-cni")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as shipped: static (see cni/README.md)
	// host-local is built outside this module (go install pkg@version), as a node would get it.
	install := exec.Command("go", "install", "github.com/containernetworking/plugins/plugins/ipam/host-local@v1.9.1")
	install.Env = append(os.Environ(), "GOBIN="+env.binDir)
	for _, cmd := range []*exec.Cmd{build, install} {
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", cmd, err, out)
		}
	}
	return nil
}
