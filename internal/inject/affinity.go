package inject

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// NodeRequirements are the node agent's labels a node must carry to run the stack
// (render.Spec.NodeRequirements), which its pods' node affinity asks for.
func (p *Prepared) NodeRequirements() []corev1.NodeSelectorRequirement {
	return p.checked.NodeRequirements()
}

// Spec is the stack's defaulted spec, as checked.
func (p *Prepared) Spec() *fsv1.StackInstanceSpec { return p.checked.Defaulted() }

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

// RequireNodeLabels adds to the pod's required node affinity that a node carry every label of
// want (the nodes a DataNetwork reaches), in key order.
func RequireNodeLabels(spec *corev1.PodSpec, want map[string]string) {
	if len(want) == 0 {
		return
	}
	keys := slices.Sorted(maps.Keys(want))
	reqs := make([]corev1.NodeSelectorRequirement, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{want[k]}})
	}
	addNodeAffinity(spec, reqs)
}
