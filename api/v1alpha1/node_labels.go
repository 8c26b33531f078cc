package v1alpha1

// Node labels and the annotation the node agent (the CNI DaemonSet's `node-agent` container)
// publishes on its own Node, and the injector's required node affinity selects by. A label is
// present only while its check passes, so a pod that needs it is never scheduled onto a node
// where the check failed; the annotation holds the whole report for `kubectl fstack doctor`.
const (
	// NodeLabelPrefix starts every label the node agent owns; it changes no other label.
	NodeLabelPrefix = "node.kubefstack.io/"
	// NodeReportAnnotation holds the node agent's last report as JSON.
	NodeReportAnnotation = "node.kubefstack.io/report"

	// NodeLabelVhostUser is "ready" when OVSDB answers, the configured bridge is a netdev
	// bridge, and the vhost-user socket root is a directory (not a symlink).
	NodeLabelVhostUser = NodeLabelPrefix + "vhost-user"
	// NodeLabelVFIO is "ready" when the IOMMU has groups and the vfio-pci module is loaded.
	NodeLabelVFIO = NodeLabelPrefix + "vfio"
	// NodeLabelCPUManager is the kubelet's CPU manager policy when it is "static".
	NodeLabelCPUManager = NodeLabelPrefix + "cpu-manager"
	// NodeLabelCgroup is the node's cgroup version, "v1" or "v2" (informational).
	NodeLabelCgroup = NodeLabelPrefix + "cgroup"
	// NodeLabelASLR is "off" or "on": kernel.randomize_va_space (informational: F-Stack's DPDK
	// secondaries, the shim included, want it off or a base_virtaddr).
	NodeLabelASLR = NodeLabelPrefix + "aslr"
	// NodeLabelSeccomp is "ready" when the dataplane's Localhost seccomp profile, as the agent
	// makes it, is in the kubelet's seccomp directory: injected dataplane containers name it, and
	// a container whose profile is missing never starts.
	NodeLabelSeccomp = NodeLabelPrefix + "seccomp"

	// NodeReady is the value of a readiness label whose check passed.
	NodeReady = "ready"
	// NodeCPUManagerStatic is NodeLabelCPUManager's only value.
	NodeCPUManagerStatic = "static"
)

// NodeLabelHugePages is "ready" while the node has free hugepages of size (e.g. "2Mi", "1Gi")
// and the kubelet reports them allocatable.
func NodeLabelHugePages(size HugePageSize) string {
	return NodeLabelPrefix + "hugepages-" + string(size)
}
