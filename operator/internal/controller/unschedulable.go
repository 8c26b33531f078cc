package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

// EventNoNodeForStack is the reason of the Warning UnschedulableReconciler records on a bound
// pod the scheduler cannot place: which nodes miss which of its node requirements, and the fix.
const EventNoNodeForStack = "NoNodeForStack"

const (
	// unschedulableRecheck: while a pod stays unschedulable it is looked at again this often, so
	// that a node that lost or gained a label changes the explanation. The scheduler's own
	// retries do not reach the operator (the cache keeps no message), and a pending pod costs
	// one GET per recheck.
	unschedulableRecheck = 5 * time.Minute
	// maxNodesListed: a cluster of hundreds of unlabelled nodes would otherwise fill the note
	// with the same line; the rest are counted, and doctor lists them all.
	maxNodesListed = 5
	// maxFixLen cuts one node agent fix line: a fix runs to a couple of hundred bytes, and five
	// nodes must fit eventNoteMax.
	maxFixLen = 160
	// maxValuesShown of a requirement's values are named; a tenant's affinity may list hundreds.
	maxValuesShown = 3
	// Unschedulable pods come in bursts (a Deployment scaled up on a cluster with no ready
	// node): a few explanations a second across all pods is plenty.
	unschedulableQPS   = 2
	unschedulableBurst = 10
)

// The Nodes are read from the cache as metadata only, the watch the node metrics start
// (nodemetrics' marker grants list and watch on nodes): labels and the agent's report are all an
// explanation needs.

// UnschedulableReconciler explains a bound pod's FailedScheduling: the scheduler says how many
// nodes "didn't match Pod's node affinity/selector", not which label of the stack's each node
// lacks nor how to get it. When an injected pod's PodScheduled condition turns False for
// Unschedulable, the reconciler compares every node with the pod's required node selection (the
// node agent's readiness labels and the DataNetwork's nodeSelector, which the injector ANDs into
// every term, and the pod's own terms, which nothing in the pod tells apart from them) and
// records one Warning naming the nodes that fail it, the labels they lack, the node agent's fix
// for each and the doctor command. Nodes that meet the selection and fail for other reasons
// (taints, resources) are the scheduler's to explain, and only counted.
type UnschedulableReconciler struct {
	// Cache reads the trimmed pods and the Nodes' metadata.
	Cache client.Reader
	// Live reads the pod's spec from the API server: the cache drops its affinity.
	Live client.Reader
	// Writer creates the Events, as PodHealthReconciler does (one by one, bounded here).
	Writer client.Writer
	// Instance names this replica in the Events (reportingInstance).
	Instance string
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	seq  atomic.Uint64
	mu   sync.Mutex
	told map[types.UID]*explained
}

// explained is what was last said about one pending pod.
type explained struct {
	note string
	// budget bounds one pod's explanations when nodes' labels flap: the same message is never
	// repeated, and a changing one costs at most a few events an hour.
	budget *rate.Limiter
}

func newExplainBudget() *rate.Limiter { return rate.NewLimiter(rate.Every(10*time.Minute), 3) }

// SetupWithManager watches the cached pods' PodScheduled condition.
func (r *UnschedulableReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.told = map[types.UID]*explained{}
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, time.Minute),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: newBucket(unschedulableQPS, unschedulableBurst)})
	return ctrl.NewControllerManagedBy(mgr).
		Named("unschedulable-explainer").
		For(&corev1.Pod{}, builder.WithPredicates(r.becameUnschedulable())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, RateLimiter: limiter}).
		Complete(r)
}

// becameUnschedulable lets through a pod that is unschedulable when first seen (a restarted
// operator explains the pods still pending) or turns so; a pod scheduled or deleted is forgotten
// here, with no reconcile.
func (r *UnschedulableReconciler) becameUnschedulable() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return podUnschedulable(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			r.forget(e.Object.GetUID())
			return false
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !podUnschedulable(e.ObjectNew) || e.ObjectNew.GetDeletionTimestamp() != nil {
				r.forget(e.ObjectNew.GetUID())
				return false
			}
			return !podUnschedulable(e.ObjectOld)
		},
	}
}

func (r *UnschedulableReconciler) forget(uid types.UID) {
	r.mu.Lock()
	delete(r.told, uid)
	r.mu.Unlock()
}

func (r *UnschedulableReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// unschedulable is the scheduler's verdict that no node fits the pod (not a scheduling gate,
// not a preemption under way).
func unschedulable(c corev1.PodCondition) bool {
	return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
}

func podUnschedulable(obj client.Object) bool {
	p, ok := obj.(*corev1.Pod)
	return ok && p.Spec.NodeName == "" && slices.ContainsFunc(p.Status.Conditions, unschedulable)
}

// Reconcile explains one unschedulable pod, when the explanation differs from the last.
func (r *UnschedulableReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cached := &corev1.Pod{}
	if err := r.Cache.Get(ctx, req.NamespacedName, cached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cached.DeletionTimestamp != nil || !podUnschedulable(cached) {
		r.forget(cached.UID)
		return ctrl.Result{}, nil
	}
	pod := &corev1.Pod{}
	if err := r.Live.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Only a pod the webhook injected carries the stack's node requirements; one that opted out
	// keeps the stack label and is the scheduler's alone to explain.
	if pod.UID != cached.UID || pod.Spec.NodeName != "" || pod.Annotations[fsv1.StatusAnnotation] == "" {
		return ctrl.Result{}, nil
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.Cache.List(ctx, nodes); err != nil {
		return ctrl.Result{}, err
	}
	failing, fitting := nodeFailures(&pod.Spec, nodes.Items)
	text := unschedulableNote(pod.Namespace+"/"+pod.Labels[fsv1.StackLabel], failing, fitting)
	if prev, say := r.toSay(pod.UID, text); say {
		e := podEvent{corev1.EventTypeWarning, EventNoNodeForStack, text}
		if err := writePodEvent(ctx, r.Writer, r.Instance, r.now(), r.seq.Add(1), pod, e); err != nil {
			r.unsay(pod.UID, text, prev)
			log.FromContext(ctx).Error(err, "record event", "pod", req.NamespacedName, "reason", e.reason)
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: unschedulableRecheck}, nil
}

// toSay reports whether text is news about the pod (and within its budget), remembering it as
// said; prev is what was said before, for unsay.
func (r *UnschedulableReconciler) toSay(uid types.UID, text string) (prev string, say bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.told[uid]
	if e == nil {
		e = &explained{budget: newExplainBudget()}
		r.told[uid] = e
	}
	prev = e.note
	if text == "" {
		// Every node meets the requirements now: should one lose them again, that is news.
		e.note = ""
		return prev, false
	}
	if text == e.note || !e.budget.AllowN(r.now(), 1) {
		return prev, false
	}
	e.note = text
	return prev, true
}

// unsay forgets that text was said, when its Event could not be written, so the retry says it.
func (r *UnschedulableReconciler) unsay(uid types.UID, text, prev string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.told[uid]; e != nil && e.note == text {
		e.note = prev
	}
}

// nodeFailure is one node that fails the pod's required node selection.
type nodeFailure struct {
	Node string
	// Misses say what the node lacks, e.g. "lacks node.kubefstack.io/vhost-user=ready".
	Misses []string
	// Fixes are the node agent's, for the checks behind the missing kube-fstack labels.
	Fixes []string
}

// nodeFailures compares every node with the pod's required node selection (its nodeSelector
// and its required node affinity's terms, one of which a node must meet): the nodes that meet
// none, by name, with what the closest term misses; and how many nodes meet it.
func nodeFailures(spec *corev1.PodSpec, nodes []metav1.PartialObjectMetadata) (failing []nodeFailure, fitting int) {
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
		failing = append(failing, nodeFailure{Node: n.Name, Misses: bestMisses, Fixes: agentFixes(n, best)})
	}
	slices.SortFunc(failing, func(a, b nodeFailure) int { return strings.Compare(a.Node, b.Node) })
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

// unschedulableNote is the Event's note: the failing nodes, up to maxNodesListed of them and as
// many as fit eventNoteMax, then how many more; "" when no node fails the selection (the
// scheduler's reasons, taints or resources, are all there is to say).
func unschedulableNote(stack string, failing []nodeFailure, fitting int) string {
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
		fits := b.Len()+len(seg)+reserve <= eventNoteMax || (i == len(failing)-1 && b.Len()+len(seg) <= eventNoteMax)
		if listed > 0 && (listed == maxNodesListed || !fits) {
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
