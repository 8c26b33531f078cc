// Package controller reconciles StackInstances: it validates each with the renderer, keeps a
// ConfigMap with what the dataplane needs (the spec snapshot and a preview config.ini), and
// reports the pods bound to it in the status.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// StackInstanceReconciler reconciles a StackInstance.
type StackInstanceReconciler struct {
	Client client.Client
	// APIReader reads what the cache does not hold: a ConfigMap without the operator's label.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Workers is how many StackInstances are reconciled at once; each waits on API writes.
	Workers int
	// OnPodEvent, when set (tests), sees the pod (the new one of an update) of each event that
	// passed PodCountsChanged, in the informer's order: a test can prove an update was filtered
	// without waiting for anything.
	OnPodEvent func(pod client.Object)
}

// conflictRecheck is how often a StackInstance whose ConfigMap name is taken looks again: the
// other ConfigMap carries no label of ours, so no watch says when it goes.
const conflictRecheck = time.Minute

// +kubebuilder:rbac:groups=kubefstack.io,resources=stackinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubefstack.io,resources=stackinstances/status,verbs=patch
// ConfigMaps: the cache watches the operator's own (list, watch); get reads one of that name
// without the operator's label; create, then server-side apply (patch) write its own. Create and
// patch are cluster-wide because StackInstances may live in any namespace.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// observation is what one reconcile learned; the status is computed from it alone.
type observation struct {
	errs field.ErrorList // why the spec is invalid
	hash string
	// configMap is what writing the ConfigMap returned (only for a valid spec).
	configMap error
	// pods is nil when the pods could not be listed: the status keeps its counts then, and the
	// Ready condition says why (podsErr).
	pods    *podCounts
	podsErr error
}

// Reconcile validates one StackInstance, writes its ConfigMap and patches its status once, in a
// deferred patch, so that whatever step fails the status says what was learned before it.
func (r *StackInstanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	si := &fsv1.StackInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, si); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	obs := &observation{hash: si.Status.ConfigHash}
	defer func() {
		retErr = kerrors.NewAggregate([]error{retErr, r.patchStatus(ctx, si, obs)})
	}()
	checked, errs := render.Prepare(&si.Spec)
	obs.errs = errs
	if checked != nil {
		obs.hash = render.ConfigHash(checked.Placeholder().Config)
		obs.configMap = r.ensureConfigMap(ctx, si, checked, obs.hash)
	}
	// countPods only reads the cached pods: no copies (TrimPod keeps them small as well).
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(si.Namespace), client.MatchingLabels{fsv1.StackLabel: si.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		obs.podsErr = err
		return ctrl.Result{}, kerrors.NewAggregate([]error{err, obs.configMap})
	}
	n := countPods(pods.Items, obs.hash)
	obs.pods = &n
	var conflict *ConflictError
	if errors.As(obs.configMap, &conflict) {
		return ctrl.Result{RequeueAfter: conflictRecheck}, nil
	}
	return ctrl.Result{}, obs.configMap
}

// patchStatus computes the whole status from obs and writes it in one patch, emitting an event
// for each condition that changed.
func (r *StackInstanceReconciler) patchStatus(ctx context.Context, si *fsv1.StackInstance, obs *observation) error {
	before := si.DeepCopy()
	valid := len(obs.errs) == 0
	st := &si.Status
	meta.SetStatusCondition(&st.Conditions, validCondition(obs.errs, si.Generation))
	meta.SetStatusCondition(&st.Conditions, configMapCondition(valid, obs.configMap, si.Generation, si.Namespace, si.Name))
	switch {
	case obs.podsErr != nil:
		meta.SetStatusCondition(&st.Conditions, podListFailedCondition(obs.podsErr, si.Generation, si.Name))
	case obs.pods != nil:
		meta.SetStatusCondition(&st.Conditions, readyCondition(valid, *obs.pods, si.Generation, si.Name))
		st.BoundPods, st.ReadyPods = obs.pods.Bound, obs.pods.Ready
	}
	st.Ready = fmt.Sprintf("%d/%d", st.ReadyPods, st.BoundPods)
	st.ObservedGeneration, st.ConfigHash = si.Generation, obs.hash
	if equality.Semantic.DeepEqual(before.Status, si.Status) {
		return nil // nothing to write: a no-op patch still costs the API server a write path
	}
	if err := r.Client.Status().Patch(ctx, si, client.MergeFrom(before)); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, c := range transitions(before.Status.Conditions, st.Conditions) {
		kind := corev1.EventTypeNormal
		if problem(c.Reason) {
			kind = corev1.EventTypeWarning
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(si, nil, kind, c.Reason, "Reconcile", "%s=%s: %s", c.Type, c.Status, c.Message)
		}
	}
	log.FromContext(ctx).V(1).Info("status", "valid", valid, "bound", st.BoundPods, "ready", st.ReadyPods)
	return nil
}

// SetupWithManager watches StackInstances, their ConfigMaps, and the pods that name them.
func (r *StackInstanceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		// Status writes (our own) and metadata changes say nothing new about the spec.
		For(&fsv1.StackInstance{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}, builder.OnlyMetadata).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToStack), builder.WithPredicates(r.podPredicates()...)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Workers)}).
		Complete(r)
}

func podToStack(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[fsv1.StackLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

func (r *StackInstanceReconciler) podPredicates() []predicate.Predicate {
	preds := []predicate.Predicate{PodCountsChanged()}
	if hook := r.OnPodEvent; hook != nil {
		// Predicates run in order and stop at the first that refuses: this one sees only what passed.
		preds = append(preds, predicate.NewPredicateFuncs(func(o client.Object) bool { hook(o); return true }))
	}
	return preds
}
