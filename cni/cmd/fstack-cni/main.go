// Command fstack-cni is the kube-fstack CNI plugin: vhost-user ports on OVS-DPDK for F-Stack
// pods. See cni/README.md for the configuration and the node contract.

// A CNI command lives for milliseconds, so two runtime services meant for long-lived programs
// only cost start-up time: re-reading the cgroup CPU limit in the background (a goroutine, so a
// thread wake-up) and naming every anonymous memory mapping for /proc/<pid>/maps (a prctl
// system call per mapping, refused on kernels without CONFIG_ANON_VMA_NAME anyway).
//
//go:debug updatemaxprocs=0
//go:debug decoratemappings=0
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/kube-fstack/kube-fstack/cni/internal/plugin"
)

func main() {
	skel.PluginMainFuncs(plugin.New().Funcs(), version.All, "fstack-cni: vhost-user ports on OVS-DPDK for kube-fstack")
}
