package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
)

// The controller binds claims to their pods (an owner reference) and deletes the ones no pod holds.
// +kubebuilder:rbac:groups=kubefstack.io,resources=addressclaims,verbs=get;list;watch;update;delete

// AddressClaimReconciler keeps every AddressClaim held by a pod. The admission webhook creates a
// claim before its pod exists (the pod has no UID yet, often no name); once the pod is stored
// this makes the pod the claim's owner, so the garbage collector deletes the claim with the pod.
// It deletes itself a claim whose owner is gone (before the garbage collector gets to it, and
// where none runs) and a claim no pod came to hold within claims.Grace (an admission whose pod
// was then refused by a later webhook or a quota). Everything it knows is in the API objects, so
// a restart or a new leader carries on where the last one stopped.
type AddressClaimReconciler struct {
	// Client reads claims and pods from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server before a claim is deleted: the cache may not have seen
	// the pod that holds it yet.
	APIReader client.Reader
	// Grace is claims.Grace unless a test sets it.
	Grace time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Reconcile binds or deletes one claim.
func (r *AddressClaimReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	claim := &fsv1.AddressClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if claim.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	grace := r.Grace
	if grace == 0 {
		grace = claims.Grace
	}
	if ref := claims.PodOwner(claim); ref != nil {
		pod := &corev1.Pod{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: ref.Name}, pod); err == nil && pod.UID == ref.UID {
			// Its owner is in the cache: nothing to do until the pod goes.
			return reconcile.Result{}, nil
		}
	} else {
		if pod, err := claims.Serving(ctx, r.Client, claim); err != nil || pod != nil {
			if err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, r.bind(ctx, claim, pod)
		}
	}
	// The cache says nobody holds it (or its owner is gone): ask the API server before acting.
	held, _, err := claims.Held(ctx, r.APIReader, claim, now, grace)
	if err != nil || held {
		if err == nil && claims.PodOwner(claim) == nil {
			// A pod being created: look again once the grace is over.
			if pod, serr := claims.Serving(ctx, r.APIReader, claim); serr == nil && pod != nil {
				return reconcile.Result{}, r.bind(ctx, claim, pod)
			}
			return reconcile.Result{RequeueAfter: claim.CreationTimestamp.Add(grace).Sub(now) + time.Second}, nil
		}
		return reconcile.Result{}, err
	}
	err = r.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or changed since it was read: the change brings it back here.
		return reconcile.Result{}, nil
	}
	if err == nil {
		log.FromContext(ctx).Info("released an address no pod holds", "claim", claim.Name, "address", claim.Spec.Address)
	}
	return reconcile.Result{}, err
}

// bind makes pod the claim's owner, without blocking the pod's deletion on it.
func (r *AddressClaimReconciler) bind(ctx context.Context, claim *fsv1.AddressClaim, pod *corev1.Pod) error {
	claim.OwnerReferences = append(claim.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID})
	err := r.Client.Update(ctx, claim)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // the change that made it stale brings it back here
	}
	return err
}

// SetupWithManager watches the claims and, for each pod of a stack, the claims of the addresses
// it serves: its creation binds them, its deletion releases them.
func (r *AddressClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("addressclaim").
		For(&fsv1.AddressClaim{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podClaims)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// podClaims names the claims of the addresses a pod says it serves; a value that does not parse
// names none (the pod wrote it).
func podClaims(_ context.Context, obj client.Object) []reconcile.Request {
	stack := obj.GetLabels()[fsv1.StackLabel]
	addrs, err := podcontract.ParseAddresses(obj.GetAnnotations()[podcontract.AddressesAnnotation])
	if stack == "" || err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{
			Namespace: obj.GetNamespace(), Name: fsv1.AddressClaimName(stack, a.Addr)}})
	}
	return out
}
