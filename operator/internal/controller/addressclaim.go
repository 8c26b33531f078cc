package controller

import (
	"cmp"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
)

// The controller reads and deletes claims anywhere (the legacy ones live in the tenants'
// namespaces) and writes them only in its own namespace: it binds them, makes them again for a
// pod whose claim was taken back, and moves the legacy ones there.
// +kubebuilder:rbac:groups=kubefstack.io,resources=addressclaims,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubefstack.io,resources=addressclaims,verbs=create;update,namespace=kube-fstack-system

// EventAddressConflict: a pod serves an address of a network whose claim another pod holds; the
// address is not published for it.
const EventAddressConflict = "AddressConflict"

// AddressClaimReconciler keeps every AddressClaim held by a pod. The admission webhook creates a
// claim before its pod exists (the pod has no UID yet, often no name); once the pod is stored
// this binds the claim to it (spec.podUID), and releases the claim once no pod of that UID is
// left, or when no pod came to hold it within the grace (an admission whose pod was then
// refused, or a forged AdmissionReview). A pod that serves an address whose claim is gone (taken
// back before the pod was stored) gets it again while the address is free, and an Event when it
// is not. Claims an operator before DataNetworks made are moved to their network's name. All it
// knows is in the API objects, so a restart or a new leader carries on where the last stopped.
type AddressClaimReconciler struct {
	// Client reads claims and pods from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server before a claim is deleted: the cache may not have seen
	// the pod that holds it yet.
	APIReader client.Reader
	// Recorder records the AddressConflict Events on pods.
	Recorder events.EventRecorder
	// Namespace is the operator's, where every claim it makes lives.
	Namespace string
	// Inject is the injector's settings: how a stack's addresses and their networks are read
	// (inject.Prepare), and the DefaultDataNetwork a legacy claim moves to.
	Inject inject.Config
	// Grace is how long a claim no pod holds is kept; zero is claims.DefaultGrace.
	Grace time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Reconcile binds, moves or deletes one claim, as claims.Decide says, or makes it again when it
// is gone and a pod serves its address: what the cache shows decides a claim held; a claim the
// cache shows free or pending is decided again on the API server's objects before it is
// released, since the cache may not have seen the pod that holds it yet.
func (r *AddressClaimReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	claim := &fsv1.AddressClaim{}
	err := r.Client.Get(ctx, req.NamespacedName, claim)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.recreate(ctx, req.NamespacedName)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if !claims.IsLegacy(claim) && claim.Namespace != r.Namespace {
		return reconcile.Result{}, nil // not the operator's: nothing reads it
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

// act does what the verdict on claim asks: bind it, move it, look again when its grace ends, or
// release it.
func (r *AddressClaimReconciler) act(ctx context.Context, claim *fsv1.AddressClaim, v claims.Verdict, now time.Time) (reconcile.Result, error) {
	switch v.State {
	case claims.Served:
		return reconcile.Result{}, r.bind(ctx, claim, v.Pod)
	case claims.Held:
		return reconcile.Result{}, r.warnOthers(ctx, claim, v.Pod)
	case claims.Adopt:
		return r.adopt(ctx, claim, v.Pod, now)
	case claims.Pending:
		return reconcile.Result{RequeueAfter: v.Until.Sub(now) + time.Second}, nil
	case claims.Free:
		// Gone already, or changed since it was read (the change brings it back here).
		_, err := claims.TakeBack(ctx, r.Client, claim)
		return reconcile.Result{}, err
	}
	// Going: nothing to do until it is gone.
	return reconcile.Result{}, nil
}

func (r *AddressClaimReconciler) clock() (time.Time, time.Duration) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	return now, cmp.Or(r.Grace, claims.DefaultGrace)
}

// bind makes the claim pod's: its UID, and its name in place of a generateName.
func (r *AddressClaimReconciler) bind(ctx context.Context, claim *fsv1.AddressClaim, pod *corev1.Pod) error {
	claim.Spec.PodUID, claim.Spec.Pod = string(pod.UID), pod.Name
	err := r.Client.Update(ctx, claim)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // the change that made it stale brings it back here
	}
	if err == nil {
		log.FromContext(ctx).V(1).Info("bound an address claim", "claim", claim.Name, "pod", pod.Namespace+"/"+pod.Name)
	}
	return err
}

// SetupWithManager watches the claims and, for each pod of a stack, the claims of the addresses
// it serves: its creation binds them (or makes them again), its deletion releases them. The
// indexes are IndexClaimsAndPods'.
func (r *AddressClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("addressclaim").
		For(&fsv1.AddressClaim{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podClaims)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// podClaims names the claims of the addresses a pod says it serves: those the cache holds for
// each address (on any network, legacy ones included: the index by address), and the name the
// claim of each would have on its port's network, for a claim that is gone. A pod's deletion
// carries its last annotation, so it finds the claims it held. A value that does not parse names
// none (the pod wrote it).
func (r *AddressClaimReconciler) podClaims(ctx context.Context, obj client.Object) []reconcile.Request {
	stack := obj.GetLabels()[fsv1.StackLabel]
	addrs, err := podcontract.ParseAddresses(obj.GetAnnotations()[podcontract.AddressesAnnotation])
	if stack == "" || err != nil || len(addrs) == 0 {
		return nil
	}
	si := &fsv1.StackInstance{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: stack}, si); err != nil {
		si = nil
	}
	seen := map[types.NamespacedName]bool{}
	for _, a := range addrs {
		var list fsv1.AddressClaimList
		if err := r.Client.List(ctx, &list, client.MatchingFields{ClaimAddressIndex: a.Addr.String()}); err != nil {
			log.FromContext(ctx).Error(err, "listing the claims of an address", "address", a.Addr)
		}
		for i := range list.Items {
			seen[client.ObjectKeyFromObject(&list.Items[i])] = true
		}
		if network := portNetwork(si, a.Port, r.Inject.DefaultDataNetwork); network != "" {
			seen[types.NamespacedName{Namespace: r.Namespace, Name: fsv1.NetworkAddressClaimName(network, a.Addr)}] = true
		}
	}
	out := make([]reconcile.Request, 0, len(seen))
	for k := range seen {
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

// portNetwork is the DataNetwork of si's port index, or "" (no such stack or port, no network).
func portNetwork(si *fsv1.StackInstance, port int, defaultNetwork string) string {
	if si == nil || port < 0 || port >= len(si.Spec.Ports) {
		return ""
	}
	return cmp.Or(si.Spec.Ports[port].DataNetwork, defaultNetwork)
}
