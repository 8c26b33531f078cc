package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// NodeRequirements are the node agent's labels a node must carry to run the stack: the static
// CPU manager, free hugepages of the stack's size and the dataplane's seccomp profile always, the vhost-user label for a
// vhost-user port (OVSDB, the netdev bridge, the socket root), the vfio label for a PCI function
// named by its address (a port's or a bond member's). Nodes without them are never picked, instead
// of a pod failing late on them. A function that comes from a device plugin's resource needs no
// label: the resource request already keeps the pod off nodes that do not advertise it, and the
// device plugin advertises only functions it has bound for DPDK. `kubectl fstack doctor` reads them
// too, to say which stacks need each of a node's checks.
func (p *Prepared) NodeRequirements() []corev1.NodeSelectorRequirement {
	in := func(key, value string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}
	}
	reqs := []corev1.NodeSelectorRequirement{
		in(fsv1.NodeLabelCPUManager, fsv1.NodeCPUManagerStatic),
		in(fsv1.NodeLabelHugePages(p.spec.Dataplane.HugePages.PageSize), fsv1.NodeReady),
		in(fsv1.NodeLabelSeccomp, fsv1.NodeReady),
	}
	if p.vhost {
		reqs = append(reqs, in(fsv1.NodeLabelVhostUser, fsv1.NodeReady))
	}
	if slices.ContainsFunc(p.spec.Ports, literalPCI) {
		reqs = append(reqs, in(fsv1.NodeLabelVFIO, fsv1.NodeReady))
	}
	return reqs
}

// addNodeAffinity ANDs reqs into every term of the pod's required node affinity (the terms are
// ORed, so each must carry them), or makes the one term; the pod's own terms and expressions stay,
// and an expression it already has is not added twice.
func addNodeAffinity(spec *corev1.PodSpec, reqs []corev1.NodeSelectorRequirement) {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	sel := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(sel.NodeSelectorTerms) == 0 {
		sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range sel.NodeSelectorTerms {
		term := &sel.NodeSelectorTerms[i]
		for _, r := range reqs {
			if !slices.ContainsFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
				return e.Key == r.Key && e.Operator == r.Operator && slices.Equal(e.Values, r.Values)
			}) {
				term.MatchExpressions = append(term.MatchExpressions, *r.DeepCopy())
			}
		}
	}
}

// literalPCI reports whether a port uses a PCI function by address rather than by resource.
func literalPCI(port fsv1.PortSpec) bool {
	byAddress := func(d fsv1.PCIDevice) bool { return d.Address != "" }
	if port.Device.PCI != nil && byAddress(*port.Device.PCI) {
		return true
	}
	return port.Device.Bond != nil && slices.ContainsFunc(port.Device.Bond.Members, byAddress)
}
