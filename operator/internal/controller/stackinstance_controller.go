// Package controller reconciles StackInstances: it validates each with the renderer, keeps a
// ConfigMap with what the dataplane needs (the spec snapshot and a preview config.ini), and
// reports the pods bound to it in the status.
package controller

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
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
	Client   client.Client
	Recorder events.EventRecorder
	// Workers is how many StackInstances are reconciled at once; each waits on API writes.
	Workers int
}

// +kubebuilder:rbac:groups=kubefstack.io,resources=stackinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubefstack.io,resources=stackinstances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile validates one StackInstance, writes its ConfigMap and patches its status once.
func (r *StackInstanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	si := &fsv1.StackInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, si); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	res, errs := renderPreview(si)
	hash := si.Status.ConfigHash
	if res != nil {
		hash = render.ConfigHash(res.Config)
		if err := r.ensureConfigMap(ctx, si, res, hash); err != nil {
			return ctrl.Result{}, err
		}
	}
	// countPods only reads the cached pods: no copies (TrimPod keeps them small as well).
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(si.Namespace), client.MatchingLabels{fsv1.StackLabel: si.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.patchStatus(ctx, si, errs, countPods(pods.Items, hash), hash)
}

// renderPreview renders the spec with placeholder facts; errs lists why it is invalid.
func renderPreview(si *fsv1.StackInstance) (*render.Result, field.ErrorList) {
	res, err := render.Render(&si.Spec, render.PlaceholderFacts(&si.Spec))
	var ve *render.ValidationError
	if errors.As(err, &ve) {
		return nil, ve.Errs
	}
	if err != nil {
		return nil, field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return res, nil
}

// patchStatus computes the whole status and writes it in one patch, emitting an event for
// each condition that changed.
func (r *StackInstanceReconciler) patchStatus(ctx context.Context, si *fsv1.StackInstance, errs field.ErrorList, n podCounts, hash string) error {
	before := si.DeepCopy()
	valid := validCondition(errs, si.Generation)
	ready := readyCondition(len(errs) == 0, n, si.Generation, si.Name)
	st := &si.Status
	meta.SetStatusCondition(&st.Conditions, valid)
	meta.SetStatusCondition(&st.Conditions, ready)
	st.ObservedGeneration, st.BoundPods, st.ReadyPods, st.ConfigHash = si.Generation, n.Bound, n.Ready, hash
	if equality.Semantic.DeepEqual(before.Status, si.Status) {
		return nil // nothing to write: a no-op patch still costs the API server a write path
	}
	if err := r.Client.Status().Patch(ctx, si, client.MergeFrom(before)); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, c := range transitions(before.Status.Conditions, st.Conditions) {
		kind := corev1.EventTypeNormal
		if c.Reason == ReasonInvalidSpec {
			kind = corev1.EventTypeWarning
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(si, nil, kind, c.Reason, "Reconcile", "%s=%s: %s", c.Type, c.Status, c.Message)
		}
	}
	log.FromContext(ctx).V(1).Info("status", "valid", valid.Status, "bound", n.Bound, "ready", n.Ready, "older", n.Older)
	return nil
}

// SetupWithManager watches StackInstances, their ConfigMaps, and the pods that name them.
func (r *StackInstanceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		// Status writes (our own) and metadata changes say nothing new about the spec.
		For(&fsv1.StackInstance{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}, builder.OnlyMetadata).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToStack)).
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
