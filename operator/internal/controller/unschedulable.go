package controller

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/kube-fstack/kube-fstack/internal/nodefit"
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

	seq atomic.Uint64
	mu  sync.Mutex
	// told is keyed by the pod's name, so that a pod deleted while being explained is forgotten
	// on its next recheck, which finds it gone.
	told map[types.NamespacedName]*explained
}

// explained is what was last said about one pending pod.
type explained struct {
	uid  types.UID
	note string
	// budget bounds one pod's explanations when nodes' labels flap: the same message is never
	// repeated, and a changing one costs at most a few events an hour.
	budget *rate.Limiter
}

func newExplainBudget() *rate.Limiter { return rate.NewLimiter(rate.Every(10*time.Minute), 3) }

// SetupWithManager watches the cached pods' PodScheduled condition.
func (r *UnschedulableReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.told = map[types.NamespacedName]*explained{}
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
			r.forget(client.ObjectKeyFromObject(e.Object))
			return false
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !podUnschedulable(e.ObjectNew) || e.ObjectNew.GetDeletionTimestamp() != nil {
				r.forget(client.ObjectKeyFromObject(e.ObjectNew))
				return false
			}
			return !podUnschedulable(e.ObjectOld)
		},
	}
}

func (r *UnschedulableReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.told, key)
	r.mu.Unlock()
}

func (r *UnschedulableReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func podUnschedulable(obj client.Object) bool {
	p, ok := obj.(*corev1.Pod)
	return ok && p.Spec.NodeName == "" && slices.ContainsFunc(p.Status.Conditions, nodefit.Unschedulable)
}

// Reconcile explains one unschedulable pod, when the explanation differs from the last.
func (r *UnschedulableReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cached := &corev1.Pod{}
	if err := r.Cache.Get(ctx, req.NamespacedName, cached); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cached.DeletionTimestamp != nil || !podUnschedulable(cached) {
		r.forget(req.NamespacedName)
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
	failing, fitting := nodefit.Failures(&pod.Spec, nodes.Items)
	text := nodefit.Note(pod.Namespace+"/"+pod.Labels[fsv1.StackLabel], failing, fitting, eventNoteMax)
	if prev, say := r.toSay(req.NamespacedName, pod.UID, text); say {
		e := podEvent{kind: corev1.EventTypeWarning, reason: EventNoNodeForStack, note: text}
		if err := writePodEvent(ctx, r.Writer, r.Instance, r.now(), r.seq.Add(1), pod, e); err != nil {
			r.unsay(req.NamespacedName, text, prev)
			log.FromContext(ctx).Error(err, "record event", "pod", req.NamespacedName, "reason", e.reason)
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: unschedulableRecheck}, nil
}

// toSay reports whether text is news about the pod (and within its budget), remembering it as
// said; prev is what was said before, for unsay.
func (r *UnschedulableReconciler) toSay(key types.NamespacedName, uid types.UID, text string) (prev string, say bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.told[key]
	if e == nil || e.uid != uid {
		e = &explained{uid: uid, budget: newExplainBudget()}
		r.told[key] = e
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
func (r *UnschedulableReconciler) unsay(key types.NamespacedName, text, prev string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.told[key]; e != nil && e.note == text {
		e.note = prev
	}
}
