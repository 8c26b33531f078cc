// Command fstack-cni is the kube-fstack CNI plugin: vhost-user ports on OVS-DPDK for F-Stack
// pods. See cni/README.md for the configuration and the node contract.
package main

import (
	"github.com/containernetworking/cni/pkg/version"
	"github.com/kube-fstack/kube-fstack/cni/internal/cnimain"

	"github.com/kube-fstack/kube-fstack/cni/internal/plugin"
)

func main() {
	cnimain.Main(plugin.New().Funcs(), version.All, "fstack-cni: vhost-user ports on OVS-DPDK for kube-fstack")
}
