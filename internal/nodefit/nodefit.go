// Package nodefit says why a pod's required node selection (its nodeSelector and required node
// affinity, where the injector puts the node agent's readiness labels and the DataNetwork's
// nodeSelector) excludes nodes: which label each node lacks or has with another value, and the
// node agent's fix from the node's report. The operator's NoNodeForStack Event and `kubectl
// fstack status` say it for a pod the scheduler cannot place; both read the Nodes as metadata.
package nodefit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

const (
	// MaxNodesListed: a cluster of hundreds of unlabelled nodes would otherwise fill a note with
	// the same line; the rest are counted, and doctor lists them all.
	MaxNodesListed = 5
	// maxFixLen cuts one node agent fix line: a fix runs to a couple of hundred bytes, and a
	// note of 1 KiB should hold more than one node.
	maxFixLen = 160
	// maxValuesShown of a requirement's values are named; a tenant's affinity may list hundreds.
	maxValuesShown = 3
)

// Unschedulable is the scheduler's verdict that no node fits the pod (not a scheduling gate,
// not a preemption under way).
func Unschedulable(c corev1.PodCondition) bool {
	return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
}

// Failure is one node that fails the pod's required node selection.
type Failure struct {
	Node string
	// Misses say what the node lacks, e.g. "lacks node.kubefstack.io/vhost-user=ready".
	Misses []string
	// Fixes are the node agent's, for the checks behind the missing kube-fstack labels.
	Fixes []string
}

// Failures compares every node with the pod's required node selection (its nodeSelector
// and its required node affinity's terms, one of which a node must meet): the nodes that meet
// none, by name, with what the closest term misses; and how many nodes meet it.
func Failures(spec *corev1.PodSpec, nodes []metav1.PartialObjectMetadata) (failing []Failure, fitting int) {
	terms := requiredTerms(spec)
	for i := range nodes {
		n := &nodes[i]
		var best []corev1.NodeSelectorRequirement
		var bestMisses []string
		fits := false
		for _, term := range terms {
			misses, missed := termMisses(term, n)
			if len(misses) == 0 {
				fits = true
				break
			}
			if bestMisses == nil || len(misses) < len(bestMisses) {
				best, bestMisses = missed, misses
			}
		}
		if fits {
			fitting++
			continue
		}
		failing = append(failing, Failure{Node: n.Name, Misses: bestMisses, Fixes: agentFixes(n, best)})
	}
	slices.SortFunc(failing, func(a, b Failure) int { return strings.Compare(a.Node, b.Node) })
	return failing, fitting
}

// nodeTerm is one alternative of the pod's required node selection.
type nodeTerm struct {
	labels, fields []corev1.NodeSelectorRequirement
}

// requiredTerms are the pod's required node affinity's terms (ORed), each ANDed with its
// nodeSelector, as the scheduler reads them; one empty term when the pod requires nothing.
func requiredTerms(spec *corev1.PodSpec) []nodeTerm {
	var selector []corev1.NodeSelectorRequirement
	for _, k := range sortedKeys(spec.NodeSelector) {
		selector = append(selector, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{spec.NodeSelector[k]}})
	}
	var terms []nodeTerm
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			terms = append(terms, nodeTerm{labels: append(slices.Clone(selector), t.MatchExpressions...), fields: t.MatchFields})
		}
	}
	if len(terms) == 0 {
		terms = []nodeTerm{{labels: selector}}
	}
	return terms
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// termMisses says what of term the node misses, and the label requirements it misses.
func termMisses(term nodeTerm, n *metav1.PartialObjectMetadata) (misses []string, missed []corev1.NodeSelectorRequirement) {
	for _, req := range term.labels {
		if m := requirementMiss(req, n.Labels); m != "" {
			misses, missed = append(misses, m), append(missed, req)
		}
	}
	// The only field a term may select on is the node's name.
	for _, req := range term.fields {
		if m := requirementMiss(req, map[string]string{req.Key: n.Name}); m != "" {
			misses = append(misses, m)
		}
	}
	return misses, missed
}

// requirementMiss says how labels fail req, or "" when they meet it.
func requirementMiss(req corev1.NodeSelectorRequirement, labels map[string]string) string {
	v, has := labels[req.Key]
	found := fmt.Sprintf("has %s=%s", req.Key, v)
	switch req.Operator {
	case corev1.NodeSelectorOpIn:
		if has && slices.Contains(req.Values, v) {
			return ""
		}
		if len(req.Values) == 1 {
			if has {
				return fmt.Sprintf("%s, not %s", found, req.Values[0])
			}
			return fmt.Sprintf("lacks %s=%s", req.Key, req.Values[0])
		}
		if has {
			return fmt.Sprintf("%s, not one of %s", found, shownValues(req.Values))
		}
		return fmt.Sprintf("lacks %s (one of %s)", req.Key, shownValues(req.Values))
	case corev1.NodeSelectorOpNotIn:
		if !has || !slices.Contains(req.Values, v) {
			return ""
		}
		return found + ", which the pod excludes"
	case corev1.NodeSelectorOpExists:
		if has {
			return ""
		}
		return "lacks " + req.Key
	case corev1.NodeSelectorOpDoesNotExist:
		if !has {
			return ""
		}
		return found + ", which the pod excludes"
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			return fmt.Sprintf("%s %s takes one value", req.Key, req.Operator)
		}
		limit, errL := strconv.ParseInt(req.Values[0], 10, 64)
		got, errG := strconv.ParseInt(v, 10, 64)
		if has && errL == nil && errG == nil &&
			((req.Operator == corev1.NodeSelectorOpGt && got > limit) || (req.Operator == corev1.NodeSelectorOpLt && got < limit)) {
			return ""
		}
		if !has {
			return "lacks " + req.Key
		}
		return fmt.Sprintf("%s, not %s %s", found, req.Operator, req.Values[0])
	}
	return fmt.Sprintf("%s has operator %q, which the scheduler rejects", req.Key, req.Operator)
}

// shownValues names the first maxValuesShown values.
func shownValues(values []string) string {
	if len(values) > maxValuesShown {
		return strings.Join(values[:maxValuesShown], ", ") + fmt.Sprintf(", ... (%d)", len(values))
	}
	return strings.Join(values, ", ")
}

// agentFixes are the node agent's fix lines for the failed checks behind the missed kube-fstack
// labels, as doctor prints them (fix <check>: <what to do>), one per label; or that the node has
// no report, when it misses one of those labels.
func agentFixes(n *metav1.PartialObjectMetadata, missed []corev1.NodeSelectorRequirement) []string {
	var wanted []string
	for _, req := range missed {
		if strings.HasPrefix(req.Key, fsv1.NodeLabelPrefix) && !slices.Contains(wanted, req.Key) {
			wanted = append(wanted, req.Key)
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	raw, ok := n.Annotations[fsv1.NodeReportAnnotation]
	if !ok {
		return []string{"no node agent report on the node: is kube-fstack's node agent (the CNI DaemonSet) running there?"}
	}
	report, err := nodecheck.ParseReport(raw)
	if err != nil {
		return []string{"the node's report annotation does not parse"}
	}
	var fixes []string
	for _, label := range wanted {
		for _, c := range report.Checks {
			if c.Label == label && c.Status == nodecheck.Fail && c.Fix != "" {
				fixes = append(fixes, cut(fmt.Sprintf("fix %s: %s", c.Name, c.Fix), maxFixLen))
				break
			}
		}
	}
	return fixes
}

// cut shortens s to n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - 3
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "..."
}

// Note is the operator's Event note: the failing nodes, up to MaxNodesListed of them and as
// many as fit maxLen bytes, then how many more; "" when no node fails the selection (the
// scheduler's reasons, taints or resources, are all there is to say).
func Note(stack string, failing []Failure, fitting, maxLen int) string {
	if len(failing) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d node(s) lack what StackInstance %s needs", len(failing), stack)
	if fitting > 0 {
		fmt.Fprintf(&b, " (%d meet it and are unschedulable for other reasons: see FailedScheduling)", fitting)
	}
	b.WriteString(": ")
	more := "and %d more (kubectl fstack doctor lists every node)"
	reserve := len(" | "+more) + 10
	listed := 0
	for i, f := range failing {
		seg := f.Node + ": " + strings.Join(f.Misses, ", ")
		for _, fix := range f.Fixes {
			seg += "; " + fix
		}
		seg += "; run kubectl fstack doctor " + f.Node
		if i > 0 {
			seg = " | " + seg
		}
		// The last node needs no room kept for the count of the rest.
		fits := b.Len()+len(seg)+reserve <= maxLen || (i == len(failing)-1 && b.Len()+len(seg) <= maxLen)
		if listed > 0 && (listed == MaxNodesListed || !fits) {
			break
		}
		b.WriteString(seg)
		listed++
	}
	if rest := len(failing) - listed; rest > 0 {
		fmt.Fprintf(&b, " | "+more, rest)
	}
	return b.String()
}

// Summary is one line for a table row: how many nodes fail, then the first of them, what it
// lacks and the doctor command; "" when none fails.
func Summary(failing []Failure) string {
	if len(failing) == 0 {
		return ""
	}
	f := failing[0]
	return fmt.Sprintf("%d node(s) lack what the stack needs; %s %s (kubectl fstack doctor %s)",
		len(failing), f.Node, strings.Join(f.Misses, ", "), f.Node)
}
