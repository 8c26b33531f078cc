package nodecheck

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// cgroupVersion is informational: the kubelet runs pods on either. cgroup v2's root (also a
// container's, under its cgroup namespace) has cgroup.controllers; v1's is a tmpfs of hierarchies.
func cgroupVersion(root *fsutil.Dir, values map[string]string) Check {
	c := Check{Name: "cgroup", Status: Pass, Label: fsv1.NodeLabelCgroup}
	_, err := root.ReadFile("sys/fs/cgroup/cgroup.controllers", readLimit)
	switch {
	case err == nil:
		values[c.Label], c.Detail = "v2", "cgroup v2"
	case notExist(err):
		values[c.Label], c.Detail = "v1", "cgroup v1"
	default:
		c.Status, c.Detail = Warn, errDetail("/sys/fs/cgroup", err)
		values[c.Label] = "unknown"
	}
	return c
}

// aslr warns when kernel.randomize_va_space is not 0: F-Stack's DPDK secondaries (the shim, the
// ff_* tools) must map the primary's memory at the same addresses.
func aslr(root *fsutil.Dir, values map[string]string) Check {
	c := Check{Name: "aslr", Status: Warn, Label: fsv1.NodeLabelASLR}
	v, err := readTrimmed(root, "proc/sys/kernel/randomize_va_space")
	switch {
	case err != nil:
		c.Detail, values[c.Label] = errDetail("/proc/sys/kernel/randomize_va_space", err), "unknown"
	case v == "0":
		c.Status, c.Detail, values[c.Label] = Pass, "kernel.randomize_va_space = 0", "off"
	default:
		c.Detail, values[c.Label] = "kernel.randomize_va_space = "+v, "on"
		c.Fix = "if DPDK secondaries (the shim) fail to map the primary's memory: sysctl -w kernel.randomize_va_space=0 (persist in /etc/sysctl.d), or set the StackInstance's spec.dpdk.baseVirtAddr"
	}
	return c
}

// vfio: PCI ports bind their device to vfio-pci, which needs an IOMMU with groups.
func vfio(root *fsutil.Dir) Check {
	c := Check{Name: "vfio", Status: Fail, Label: fsv1.NodeLabelVFIO}
	groups := 0
	if d, err := root.OpenDir("sys/kernel/iommu_groups"); err == nil {
		names, _ := d.Names()
		groups = len(names)
		d.Close()
	}
	d, merr := root.OpenDir("sys/module/vfio_pci")
	if merr == nil {
		d.Close()
	}
	c.Detail = fmt.Sprintf("%d IOMMU groups, vfio_pci %s", groups, map[bool]string{true: "loaded", false: "not loaded"}[merr == nil])
	switch {
	case groups == 0:
		c.Fix = "only stacks with PCI ports need this: enable the IOMMU (intel_iommu=on or amd_iommu=on iommu=pt on the kernel command line, VT-d in the firmware) and modprobe vfio-pci"
	case merr != nil:
		c.Fix = "only stacks with PCI ports need this: modprobe vfio-pci (persist it in /etc/modules-load.d)"
	default:
		c.Status = Pass
	}
	return c
}

// cpuManager reads the policy from the kubelet's CPU manager checkpoint, which every kubelet
// writes at start whatever its policy.
func cpuManager(kubeletDir string) Check {
	c := Check{Name: "cpu-manager", Status: Fail, Label: fsv1.NodeLabelCPUManager}
	const fix = "set cpuManagerPolicy: static (and a CPU reservation, e.g. kubeReserved.cpu) in the kubelet's configuration, remove /var/lib/kubelet/cpu_manager_state and restart the kubelet"
	st, err := readCheckpoint(kubeletDir)
	var dirErr *kubeletDirError
	switch {
	case errors.As(err, &dirErr):
		c.Detail, c.Fix = err.Error(), "the node agent needs the kubelet's root dir (chart value nodeAgent.kubeletDir)"
		return c
	case err != nil:
		c.Detail, c.Fix = err.Error(), fix
		return c
	}
	c.Detail = "policy " + st.PolicyName
	if st.PolicyName != fsv1.NodeCPUManagerStatic {
		c.Fix = fix
		return c
	}
	c.Status = Pass
	return c
}

// socketRoot: fstack-cni makes a directory per pod under the root and injected pods mount it, so
// it must be a real directory; a symlink would send both somewhere else.
func socketRoot(parent, name string) Check {
	c := Check{Name: "socket-root", Status: Fail, Label: fsv1.NodeLabelVhostUser}
	shown := parent + "/" + name
	d, err := fsutil.OpenDir(parent)
	if err != nil {
		c.Detail, c.Fix = errDetail(shown, err), "create the socket root's parent directory (the CNI DaemonSet creates the root itself)"
		return c
	}
	defer d.Close()
	st, err := d.Lstat(name)
	switch {
	case err != nil:
		c.Detail, c.Fix = errDetail(shown, err), "the CNI DaemonSet creates it when its pod starts: restart the pod, or mkdir -m 0755 it"
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		c.Detail, c.Fix = "is a symlink", "replace the symlink with a directory (mkdir -m 0755), then restart the CNI DaemonSet's pod"
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		c.Detail, c.Fix = "is not a directory", "replace it with a directory (mkdir -m 0755)"
	default:
		c.Status, c.Detail = Pass, "directory"
	}
	return c
}
