package cli

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

// buildDoctorReport judges what fetchDoctorInput read, with no API call: each node's checks
// and the stacks it can run, each stack's placement, the pods, the setup.
func buildDoctorReport(in doctorInput) *DoctorReport {
	r := &DoctorReport{TypeMeta: metav1.TypeMeta{APIVersion: OutputGroupVersion.String(), Kind: "DoctorReport"},
		Nodes: []NodeDoctor{}, Stacks: []StackNeeds{}, Pods: []PodDoctor{}, Setup: []SetupCheck{}, Problems: []string{},
		StacksError: in.stacksErr}
	sortDoctorInput(&in)
	reqs := make([]stackReqs, len(in.stacks))
	for i := range in.stacks {
		reqs[i] = requirements(&in.stacks[i])
	}
	for i := range in.nodes {
		r.Nodes = append(r.Nodes, nodeDoctor(&in.nodes[i], reqs))
	}
	podNodes := podNodesByStack(in.pods)
	for i, s := range reqs {
		sn := r.stackNeeds(&in.stacks[i], s, podNodes[s.key])
		if s.err == "" {
			r.judgePlacement(s.key, &sn, in.named)
		}
		r.Stacks = append(r.Stacks, sn)
	}
	r.judgePods(in)
	r.judgeSetup(in)
	return r
}

// sortDoctorInput orders the nodes by name and the stacks by namespace and name, as the report
// lists them.
func sortDoctorInput(in *doctorInput) {
	sort.Slice(in.nodes, func(i, j int) bool { return in.nodes[i].Name < in.nodes[j].Name })
	sort.Slice(in.stacks, func(i, j int) bool {
		a, b := in.stacks[i], in.stacks[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
}

// podNodesByStack are the nodes each stack (namespace/name) has a scheduled pod on.
func podNodesByStack(pods []corev1.Pod) map[string][]string {
	out := map[string][]string{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		k := p.Namespace + "/" + p.Labels[fsv1.StackLabel]
		if !slices.Contains(out[k], p.Spec.NodeName) {
			out[k] = append(out[k], p.Spec.NodeName)
		}
	}
	return out
}

// stackNeeds is si's entry: what it requires, the nodes of r that can run it (none when its
// requirements are unknown), and podNodes, where its pods are.
func (r *DoctorReport) stackNeeds(si *fsv1.StackInstance, s stackReqs, podNodes []string) StackNeeds {
	sn := StackNeeds{Namespace: si.Namespace, Name: si.Name, Requires: []string{}, Error: s.err,
		Nodes: []string{}, PodNodes: podNodes}
	if sn.PodNodes == nil {
		sn.PodNodes = []string{}
	}
	sort.Strings(sn.PodNodes)
	for _, q := range s.reqs {
		sn.Requires = append(sn.Requires, q.Key+"="+strings.Join(q.Values, ","))
	}
	if s.err != "" {
		return sn
	}
	for _, n := range r.Nodes {
		if slices.Contains(n.CanRun, s.key) {
			sn.Nodes = append(sn.Nodes, n.Name)
		}
	}
	return sn
}

// judgePlacement adds the stack key's problems: a pod on a node that lacks what it needs; and,
// unless one node was named, no node examined that can run it.
func (r *DoctorReport) judgePlacement(key string, sn *StackNeeds, named bool) {
	for _, n := range r.Nodes {
		if !slices.Contains(sn.PodNodes, n.Name) {
			continue
		}
		if missing, ok := n.cannotRun(key); ok {
			r.Problems = append(r.Problems, fmt.Sprintf("StackInstance %s has a pod on node %s, which lacks %s",
				key, n.Name, strings.Join(missing, " ")))
		}
	}
	if !named && len(sn.Nodes) == 0 && len(r.Nodes) > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("StackInstance %s can run on no node: its pods stay Pending until a node has %s",
			key, strings.Join(sn.Requires, " ")))
	}
}

// cannotRun is what n lacks for the stack key, and whether it lacks anything.
func (n *NodeDoctor) cannotRun(key string) ([]string, bool) {
	for _, m := range n.CannotRun {
		if m.Stack == key {
			return m.Missing, true
		}
	}
	return nil, false
}

// nodeDoctor is n's entry: its kube-fstack labels, the stacks it can and cannot run, and its
// node agent's checks with the stacks that need each.
func nodeDoctor(n *corev1.Node, stacks []stackReqs) NodeDoctor {
	d := NodeDoctor{Name: n.Name, Labels: map[string]string{}, Checks: []DoctorCheck{}, CanRun: []string{}, CannotRun: []StackMissing{}}
	for k, v := range n.Labels {
		if strings.HasPrefix(k, fsv1.NodeLabelPrefix) {
			d.Labels[k] = v
		}
	}
	d.placeStacks(n, stacks)
	raw, ok := n.Annotations[fsv1.NodeReportAnnotation]
	if !ok {
		return d
	}
	d.Report = true
	rep, err := nodecheck.ParseReport(raw)
	if err != nil {
		d.ReportError = err.Error()
		return d
	}
	for _, c := range rep.Checks {
		d.Checks = append(d.Checks, doctorCheck(c, stacks))
	}
	return d
}

// placeStacks sorts the stacks whose requirements are known into those n's labels meet and those
// they do not.
func (d *NodeDoctor) placeStacks(n *corev1.Node, stacks []stackReqs) {
	for _, s := range stacks {
		if s.err != "" {
			continue
		}
		if m := s.missing(n); len(m) > 0 {
			d.CannotRun = append(d.CannotRun, StackMissing{Stack: s.key, Missing: m})
		} else {
			d.CanRun = append(d.CanRun, s.key)
		}
	}
}

// doctorCheck is c with the stacks that ask for the label it decides.
func doctorCheck(c nodecheck.Check, stacks []stackReqs) DoctorCheck {
	dc := DoctorCheck{Name: c.Name, Status: string(c.Status), Detail: c.Detail, Fix: c.Fix, Label: c.Label, NeededBy: []string{}}
	if c.Label == "" {
		return dc
	}
	for _, s := range stacks {
		if s.needs(c.Label) {
			dc.NeededBy = append(dc.NeededBy, s.key)
		}
	}
	return dc
}
