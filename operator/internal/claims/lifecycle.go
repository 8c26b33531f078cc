package claims

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A claim's lifecycle is decided here, once, for both its deciders: the admission webhook, which
// takes back a claim that stands between a pod and its address, and the operator's controller,
// which binds a claim to its pod and releases the ones no pod holds. Each gathers the facts from
// its reader (Gather) and asks the same pure policies (Decide), so the two never disagree on
// whether a claim is held; both release through TakeBack.

// Facts is what the lifecycle of one claim is decided on, as one reader saw it.
type Facts struct {
	Claim *fsv1.AddressClaim
	// Owner is the pod the claim's owner reference names, as read by that name; nil when the
	// claim has no pod owner or no pod has that name.
	Owner *corev1.Pod
	// Serving is the oldest pod of the stack whose addresses annotation lists the claim's
	// address; read only for a claim no pod owns (an owner settles who holds it).
	Serving *corev1.Pod
	// Now and Grace place the claim in its grace: how long a claim may stay without a pod
	// before it is taken back.
	Now   time.Time
	Grace time.Duration
}

// State is where a claim is in its lifecycle.
type State int

const (
	// Free: nobody holds the claim any longer (its owner is gone, or no pod came within the
	// grace): release it.
	Free State = iota
	// Going: the claim is being deleted; its address is not free until it is gone.
	Going
	// Owned: the pod that owns the claim exists.
	Owned
	// Served: no pod owns the claim yet, but a pod of the stack serves its address: bind the
	// claim to it.
	Served
	// Pending: no pod owns or serves the claim, and it is within its grace: its pod may still be
	// being created.
	Pending
)

// Verdict is the decision on one claim.
type Verdict struct {
	State State
	// Holder names who holds the claim, for an admission it refuses; empty when Free.
	Holder string
	// Pod is the pod to bind the claim to, when Served.
	Pod *corev1.Pod
	// Until is when the grace of a Pending claim ends.
	Until time.Time
}

// Held says whether the claim's address is taken.
func (v Verdict) Held() bool { return v.State != Free }

// policy decides a claim when it applies to the facts (ok), else leaves it to the next.
type policy func(Facts) (v Verdict, ok bool)

// policies are asked in order; the first that applies decides. A claim none applies to is Free.
var policies = []policy{going, ownerLives, ownerGone, served, inGrace}

// Decide is the one decision on a claim.
func Decide(f Facts) Verdict {
	for _, p := range policies {
		if v, ok := p(f); ok {
			return v
		}
	}
	return Verdict{State: Free}
}

func going(f Facts) (Verdict, bool) {
	return Verdict{State: Going, Holder: "a pod being deleted (its claim is going)"}, f.Claim.DeletionTimestamp != nil
}

// ownerLives holds a claim to its owner while a pod of that name and UID exists: a pod of the
// same name with another UID is a new pod, which did not claim this address.
func ownerLives(f Facts) (Verdict, bool) {
	ref := PodOwner(f.Claim)
	if ref == nil || f.Owner == nil || f.Owner.UID != ref.UID {
		return Verdict{}, false
	}
	return Verdict{State: Owned, Holder: "pod " + ref.Name}, true
}

// ownerGone frees a claim whose owner is gone, whatever pod serves the address meanwhile: the
// owner's deletion is what released it.
func ownerGone(f Facts) (Verdict, bool) {
	return Verdict{State: Free}, PodOwner(f.Claim) != nil
}

func served(f Facts) (Verdict, bool) {
	if f.Serving == nil {
		return Verdict{}, false
	}
	return Verdict{State: Served, Holder: "pod " + f.Serving.Name, Pod: f.Serving}, true
}

// inGrace holds a claim nothing holds yet until its grace ends: an admission creates the claim
// before the API server stores the pod.
func inGrace(f Facts) (Verdict, bool) {
	until := f.Claim.CreationTimestamp.Add(f.Grace)
	return Verdict{State: Pending, Holder: "a pod being created", Until: until}, f.Now.Before(until)
}

// Gather reads from r what Decide needs on claim: its owner, or the pod serving its address.
func Gather(ctx context.Context, r client.Reader, claim *fsv1.AddressClaim, now time.Time, grace time.Duration) (Facts, error) {
	f := Facts{Claim: claim, Now: now, Grace: grace}
	if claim.DeletionTimestamp != nil {
		return f, nil
	}
	if ref := PodOwner(claim); ref != nil {
		pod := &corev1.Pod{}
		err := r.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: ref.Name}, pod)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return f, fmt.Errorf("read pod %s: %w", ref.Name, err)
		default:
			f.Owner = pod
		}
		return f, nil
	}
	pod, err := Serving(ctx, r, claim)
	f.Serving = pod
	return f, err
}

// TakeBack deletes a claim Decide found Free, as it was read: gone is false when it changed
// since (a pod bound it, or it was recreated), which brings it back to its deciders.
func TakeBack(ctx context.Context, w client.Writer, claim *fsv1.AddressClaim) (gone bool, err error) {
	err = w.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion})
	switch {
	case apierrors.IsConflict(err):
		return false, nil
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	log.FromContext(ctx).Info("released an address claim no pod holds", "claim", claim.Name, "address", claim.Spec.Address)
	return true, nil
}

// PodOwner is the pod that owns claim, or nil.
func PodOwner(claim *fsv1.AddressClaim) *metav1.OwnerReference {
	for i, ref := range claim.OwnerReferences {
		if ref.Kind == "Pod" && ref.APIVersion == "v1" {
			return &claim.OwnerReferences[i]
		}
	}
	return nil
}

// Serving is the oldest pod of the claim's stack, in its namespace, whose addresses annotation
// lists the claim's address, or nil. Pods being deleted still serve it.
func Serving(ctx context.Context, r client.Reader, claim *fsv1.AddressClaim) (*corev1.Pod, error) {
	want, err := netip.ParseAddr(claim.Spec.Address)
	if err != nil {
		return nil, fmt.Errorf("address claim %s: address %q: %w", claim.Name, podcontract.Printable(claim.Spec.Address), err)
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(claim.Namespace), client.MatchingLabels{fsv1.StackLabel: claim.Spec.StackInstance}); err != nil {
		return nil, fmt.Errorf("list the pods of StackInstance %q: %w", claim.Spec.StackInstance, err)
	}
	var best *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		addrs, err := podcontract.ParseAddresses(p.Annotations[podcontract.AddressesAnnotation])
		if err != nil || !slices.ContainsFunc(addrs, func(s podcontract.ServedAddress) bool { return s.Addr == want }) {
			continue
		}
		if best == nil || p.CreationTimestamp.Before(&best.CreationTimestamp) {
			best = p
		}
	}
	return best, nil
}
