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

// Reconcile binds or deletes one claim, as claims.Decide says: what the cache shows decides a
// claim held (its owner, or a pod serving its address to bind it to); a claim the cache shows
// free or pending is decided again on the API server's objects before it is released, since the
// cache may not have seen the pod that holds it yet.
func (r *AddressClaimReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	claim := &fsv1.AddressClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	now, grace := r.clock()
	v, err := decide(ctx, r.Client, claim, now, grace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if v.State == claims.Free || v.State == claims.Pending {
		if v, err = decide(ctx, r.APIReader, claim, now, grace); err != nil {
			return reconcile.Result{}, err
		}
	}
	return r.act(ctx, claim, v, now)
}

func decide(ctx context.Context, reader client.Reader, claim *fsv1.AddressClaim, now time.Time, grace time.Duration) (claims.Verdict, error) {
	facts, err := claims.Gather(ctx, reader, claim, now, grace)
	if err != nil {
		return claims.Verdict{}, err
	}
	return claims.Decide(facts), nil
}

// act does what the verdict on claim asks: bind it, look again when its grace ends, or release it.
func (r *AddressClaimReconciler) act(ctx context.Context, claim *fsv1.AddressClaim, v claims.Verdict, now time.Time) (reconcile.Result, error) {
	switch v.State {
	case claims.Served:
		return reconcile.Result{}, r.bind(ctx, claim, v.Pod)
	case claims.Pending:
		return reconcile.Result{RequeueAfter: v.Until.Sub(now) + time.Second}, nil
	case claims.Free:
		// Gone already, or changed since it was read (the change brings it back here).
		_, err := claims.TakeBack(ctx, r.Client, claim)
		return reconcile.Result{}, err
	}
	// Going, or Owned: nothing to do until the pod goes.
	return reconcile.Result{}, nil
}

func (r *AddressClaimReconciler) clock() (time.Time, time.Duration) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	grace := r.Grace
	if grace == 0 {
		grace = claims.Grace
	}
	return now, grace
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
