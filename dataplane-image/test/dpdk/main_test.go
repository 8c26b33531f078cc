// Package dpdk is the dataplane tier: the supervisor binary driving real DPDK processes. What
// is real: the supervisor (built and exec'd, as the stand-in image builds it: the product's
// supervisor code with the stand-in's program mode added, dataplane-image/standin/cmd),
// Debian's dpdk-testpmd as the F-Stack primary started with exactly the EAL arguments F-Stack
// builds from the rendered config.ini (one substitution: -c<cpu> becomes two lcores on that
// same CPU, because testpmd needs a forwarding lcore), a private OVS-DPDK connecting to its
// vhost-user socket, hugepages, mount and PID namespaces playing the pod's containers, and
// dpdk-proc-info as the app-side DPDK secondary. What is not: F-Stack itself, which cannot be
// built here.
package dpdk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

const bridge = "br-fsdp"

// dataplanePages is what one testpmd primary (8192 mbufs, dynamic memory) and its secondaries
// take, with room to spare.
const dataplanePages = 120

var env struct {
	tmp        string
	supervisor string
	// standinProgram stands in for a program linked with libfstack (spec.program).
	standinProgram string
	// standinNginx stands in for F-Stack's Nginx (spec.program mode Nginx).
	standinNginx string
	huge         *nodetest.Hugepages
	ovs          *nodetest.OVS
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dataplane test setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	for _, bin := range []string{"dpdk-proc-info", "taskset"} {
		if _, err := exec.LookPath(bin); err != nil {
			return 0, fmt.Errorf("%s not found: apt-get install --no-install-recommends dpdk-dev util-linux (hack/install-deps.sh)", bin)
		}
	}
	node, err := nodetest.StartNode("fsk-dp-", bridge, dataplanePages)
	if err != nil {
		return 0, err
	}
	defer node.Close()
	env.tmp, env.huge, env.ovs = node.Tmp, node.Huge, node.OVS
	env.supervisor = filepath.Join(env.tmp, "fstack-supervisor")
	env.standinProgram = filepath.Join(env.tmp, "fstack-standin-program")
	env.standinNginx = filepath.Join(env.tmp, "fstack-standin-nginx")
	for bin, pkg := range map[string]string{env.supervisor: "dataplane-image/standin/cmd/fstack-supervisor",
		env.standinProgram: "dataplane-image/standin/native/cmd/fstack-standin-program",
		env.standinNginx:   "dataplane-image/standin/native/cmd/fstack-standin-nginx"} {
		build := exec.Command("go", "build", "-o", bin, "github.com/kube-fstack/kube-fstack/"+pkg)
		if out, err := build.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("build %s: %w: %s", pkg, err, out)
		}
	}
	return m.Run(), nil
}
