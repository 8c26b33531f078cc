package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kube-fstack/kube-fstack/cni/internal/plugin"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// The fault run of `make bench-cni` as a test of the node tier (root; what is real: a private
// OVS-DPDK, the fstack-cni and host-local binaries exec'd by libcni, SIGKILL, OVS restarts; the
// test stands in for the kubelet, making each pod's emptyDir before ADD and removing it after
// the last DEL). Fewer cycles than the bench's 1000, with every fault kind (two OVS restarts mid-
// ADD, 20 killed ADDs); every run must leak nothing: no port, link, directory, device info or
// lease. A link never needs a marker to be found, so no killed step leaves what DEL and GC
// cannot remove (issue 23: the hostPath layout leaked a directory made before its marker).
func TestFaultRunLeaksNothing(t *testing.T) {
	node, err := nodetest.StartNode("fskf-", "br-fstack", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	bin := filepath.Join(node.Tmp, "bin")
	nodeConfig := filepath.Join(node.Tmp, "etc-kube-fstack", "cni.json") // not the machine's
	build := exec.Command("go", "build", "-ldflags", plugin.NodeConfigLDFlag(nodeConfig), "-o", bin+"/", "github.com/kube-fstack/kube-fstack/cni/cmd/fstack-cni")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	install := exec.Command("go", "install", "github.com/containernetworking/plugins/plugins/ipam/host-local@v1.9.1")
	install.Env = append(os.Environ(), "GOBIN="+bin)
	for _, cmd := range []*exec.Cmd{build, install} {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", cmd, err, out)
		}
	}
	b := &bench{bin: bin, tmp: node.Tmp, ovs: node.OVS, nodeConfig: nodeConfig}
	if err := b.faults(200); err != nil {
		t.Fatal(err)
	}
}
