package controller

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
)

// wanter is a pod that serves an address of a network as its stack gives it, on port.
type wanter struct {
	pod  *corev1.Pod
	port string
}

// recreate makes the claim key names again, bound to the oldest pod that serves its address as
// its stack gives it (a claim taken back after its grace while the pod's creation was slow): the
// create is the arbiter, so an address another pod has claimed meanwhile stays that pod's, and
// this one gets an Event when that claim is reconciled (warnOthers).
func (r *AddressClaimReconciler) recreate(ctx context.Context, key types.NamespacedName) error {
	network, addr, ok := claims.ParseName(key.Name)
	if key.Namespace != r.Namespace || !ok {
		return nil
	}
	want, err := r.wanting(ctx, network, addr, "", true)
	if err != nil || len(want) == 0 {
		return err
	}
	w := want[0]
	claim := claims.New(r.Namespace, network, addr, w.pod.Labels[fsv1.StackLabel], w.port,
		claims.Binding{Namespace: w.pod.Namespace, Name: w.pod.Name, UID: w.pod.UID})
	if err := r.Client.Create(ctx, claim); err != nil {
		return client.IgnoreAlreadyExists(err) // its own events decide it
	}
	log.FromContext(ctx).Info("claimed again an address a pod serves, whose claim was gone", "claim", claim.Name,
		"pod", w.pod.Namespace+"/"+w.pod.Name)
	return nil
}

// warnOthers records an AddressConflict Event on every live pod other than holder that serves
// claim's address as its stack gives it: the address is not that pod's.
func (r *AddressClaimReconciler) warnOthers(ctx context.Context, claim *fsv1.AddressClaim, holder *corev1.Pod) error {
	addr, err := netip.ParseAddr(claim.Spec.Address)
	if err != nil {
		return nil
	}
	others, err := r.wanting(ctx, claim.Spec.Network, addr, holder.UID, false)
	for _, w := range others {
		r.conflict(w.pod, claim.Spec.Network, addr, claims.Verdict{State: claims.Held, Pod: holder})
	}
	return err
}

// conflict records that pod serves addr of network, which v's holder holds.
func (r *AddressClaimReconciler) conflict(pod *corev1.Pod, network string, addr netip.Addr, v claims.Verdict) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventAddressConflict, "ClaimAddress",
		"address %s on DataNetwork %s is held by %s, so it is not this pod's: it is not published, and the pod must not serve it; "+
			"delete this pod (its replacement is given a free address)", addr, network, v.HolderSeenFrom(pod.Namespace))
}

// wanting are the live pods, oldest first, that serve addr on network as their stack gives it
// (in a namespace that opted in, when optedIn), except the pod of UID except.
func (r *AddressClaimReconciler) wanting(ctx context.Context, network string, addr netip.Addr, except types.UID, optedIn bool) ([]wanter, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.MatchingFields{PodAddressIndex: addr.String()}); err != nil {
		return nil, fmt.Errorf("list the pods that serve %s: %w", addr, err)
	}
	var out []wanter
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.UID == except || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
			p.Annotations[fsv1.InjectAnnotation] == "false" {
			continue
		}
		if ok, err := claims.OptedIn(ctx, r.Client, p.Namespace); err != nil || (optedIn && !ok) {
			continue
		}
		if port, ok := r.wants(ctx, p, network, addr); ok {
			out = append(out, wanter{pod: p, port: port})
		}
	}
	slices.SortFunc(out, func(a, b wanter) int {
		if claims.Older(a.pod, b.pod) {
			return -1
		}
		return 1
	})
	return out, nil
}

// wants says whether pod serves addr on network as its stack gives it (the port's static address,
// or one of its pool, on that network), and on which port: an annotation is the pod's to write,
// so only what an admission could have given the pod may be claimed for it.
func (r *AddressClaimReconciler) wants(ctx context.Context, pod *corev1.Pod, network string, addr netip.Addr) (string, bool) {
	served, err := podcontract.ParseAddresses(pod.Annotations[podcontract.AddressesAnnotation])
	if err != nil {
		return "", false
	}
	si := &fsv1.StackInstance{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Labels[fsv1.StackLabel]}, si); err != nil {
		return "", false
	}
	prep, err := inject.Prepare(si, r.Inject)
	if err != nil {
		return "", false
	}
	for _, s := range served {
		for _, n := range prep.AddressNeeds() {
			if s.Addr == addr && n.Port == s.Port && n.Network == network &&
				(n.Pool == nil && n.Static.Addr() == addr || n.Pool != nil && n.Pool.Contains(addr)) {
				return n.PortName, true
			}
		}
	}
	return "", false
}

// adopt moves a legacy claim (an operator before DataNetworks made it, in pod's namespace) to its
// network's name in the operator's namespace, bound to pod: the default DataNetwork's claim is
// made, then the legacy one deleted. When another pod holds that claim, the legacy claim stays
// (it still keeps the address from the pod's own stack) and pod gets an AddressConflict Event.
func (r *AddressClaimReconciler) adopt(ctx context.Context, legacy *fsv1.AddressClaim, pod *corev1.Pod, now time.Time) (reconcile.Result, error) {
	network := r.Inject.DefaultDataNetwork
	addr, err := netip.ParseAddr(legacy.Spec.Address)
	if err != nil {
		return reconcile.Result{}, nil // Gather refused it already
	}
	if network == "" {
		log.FromContext(ctx).Info("cannot move a claim an older operator made: the operator has no --default-data-network", "claim", legacy.Namespace+"/"+legacy.Name)
		return reconcile.Result{}, nil
	}
	claim := claims.New(r.Namespace, network, addr, legacy.Spec.StackInstance, legacy.Spec.Port,
		claims.Binding{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID})
	err = r.Client.Create(ctx, claim)
	if apierrors.IsAlreadyExists(err) {
		if err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err) // gone meanwhile: its deletion is seen again
		}
		if claim.Spec.PodUID != string(pod.UID) {
			return r.adoptTaken(ctx, claim, pod, addr, now)
		}
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.Client.Delete(ctx, legacy, client.Preconditions{UID: &legacy.UID}); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	log.FromContext(ctx).Info("moved an address claim an older operator made to its network's", "legacy", legacy.Namespace+"/"+legacy.Name,
		"claim", claim.Name)
	return reconcile.Result{}, nil
}

// adoptTaken handles the network's claim of a legacy claim's address held for another pod: taken
// back when nobody holds it (the legacy claim moves next time), else the conflict is recorded.
func (r *AddressClaimReconciler) adoptTaken(ctx context.Context, cur *fsv1.AddressClaim, pod *corev1.Pod, addr netip.Addr, now time.Time) (reconcile.Result, error) {
	_, grace := r.clock()
	v, err := decide(ctx, r.APIReader, cur, now, grace)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case v.State == claims.Free:
		_, err := claims.TakeBack(ctx, r.Client, cur)
		return reconcile.Result{RequeueAfter: time.Second}, err
	case v.State == claims.Pending:
		return reconcile.Result{RequeueAfter: v.Until.Sub(now) + time.Second}, nil
	}
	r.conflict(pod, cur.Spec.Network, addr, v)
	return reconcile.Result{}, nil
}
