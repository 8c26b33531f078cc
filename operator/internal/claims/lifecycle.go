package claims

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A claim's lifecycle is decided here, once, for both its deciders: the admission webhook, which
// takes back a claim that stands between a pod and its address, and the operator's controller,
// which binds a claim to its pod, moves a legacy claim, and releases the ones no pod holds. Each
// gathers the facts from its reader (Gather) and asks the same pure policies (Decide), so the two
// never disagree on whether a claim is held; both release through TakeBack.
//
// A claim is bound to its pod by UID (spec.podUID), never by an owner reference: a claim lives in
// the operator's namespace and its pod in another, and the garbage collector deletes a dependent
// whose owner reference names an object of another namespace. A claim an operator before
// DataNetworks made (a legacy claim: no spec.network, in its pod's namespace, bound by an owner
// reference) is decided by the same policies, its owner reference standing for spec.podUID.

// Facts is what the lifecycle of one claim is decided on, as one reader saw it.
type Facts struct {
	Claim *fsv1.AddressClaim
	// Holder is the pod of the name and namespace the claim is bound to, as read by that name;
	// nil when the claim is not bound or no pod has that name.
	Holder *corev1.Pod
	// Serving is the oldest pod that may bind the claim (Matches); read only for a claim not
	// bound yet.
	Serving *corev1.Pod
	// OptedIn says whether Serving's namespace is labelled for injection: only a pod the injector
	// was sent may hold an address.
	OptedIn bool
	// Now and Grace place the claim in its grace: how long a claim may stay without a pod
	// before it is taken back.
	Now   time.Time
	Grace time.Duration
}

// State is where a claim is in its lifecycle.
type State int

const (
	// Free: nobody holds the claim any longer (its pod is gone, or no pod came within the
	// grace): release it.
	Free State = iota
	// Going: the claim is being deleted; its address is not free until it is gone.
	Going
	// Held: the pod the claim is bound to exists.
	Held
	// Served: the claim is not bound yet, and a pod of its namespace, stack and name serves its
	// address: bind the claim to it.
	Served
	// Pending: no pod holds or serves the claim, and it is within its grace: its pod may still
	// be being created.
	Pending
	// Adopt: a legacy claim a live pod holds or serves: move it to its network's claim, bound to
	// that pod.
	Adopt
)

// Verdict is the decision on one claim.
type Verdict struct {
	State State
	// Namespace is the namespace of the pod the claim is for.
	Namespace string
	// Pod is the pod that holds the claim (Held), or to bind or move it to (Served, Adopt).
	Pod *corev1.Pod
	// Until is when the grace of a Pending claim ends.
	Until time.Time
}

// Held says whether the claim's address is taken.
func (v Verdict) Held() bool { return v.State != Free }

// HolderSeenFrom names who holds the claim for an admission of namespace ns that it refuses: the
// pod's name within ns, and no name of another namespace's (a tenant learns nothing of another).
func (v Verdict) HolderSeenFrom(ns string) string {
	switch {
	case v.State == Free:
		return ""
	case v.State == Going:
		return "a pod being deleted (its claim is going)"
	case v.Namespace != ns:
		return "a pod of another namespace"
	case v.State == Pending || v.Pod == nil:
		return "a pod being created"
	}
	return "pod " + v.Pod.Name
}

// policy decides a claim when it applies to the facts (ok), else leaves it to the next.
type policy func(Facts) (v Verdict, ok bool)

// policies are asked in order; the first that applies decides. A claim none applies to is Free.
var policies = []policy{going, holderLives, holderGone, served, inGrace}

// Decide is the one decision on a claim.
func Decide(f Facts) Verdict {
	for _, p := range policies {
		if v, ok := p(f); ok {
			v.Namespace = BoundTo(f.Claim).Namespace
			return v
		}
	}
	return Verdict{State: Free}
}

func going(f Facts) (Verdict, bool) {
	return Verdict{State: Going}, f.Claim.DeletionTimestamp != nil
}

// holderLives holds a claim to its pod while a pod of that name and UID exists: a pod of the same
// name with another UID is a new pod, which did not claim this address.
func holderLives(f Facts) (Verdict, bool) {
	b := BoundTo(f.Claim)
	if b.UID == "" || f.Holder == nil || f.Holder.UID != b.UID {
		return Verdict{}, false
	}
	if IsLegacy(f.Claim) {
		return Verdict{State: Adopt, Pod: f.Holder}, true
	}
	return Verdict{State: Held, Pod: f.Holder}, true
}

// holderGone frees a bound claim whose pod is gone, whatever pod serves the address meanwhile:
// the pod's deletion is what released it.
func holderGone(f Facts) (Verdict, bool) {
	return Verdict{State: Free}, BoundTo(f.Claim).UID != ""
}

// served binds a claim to the pod it was made for, once that pod exists in a namespace that
// opted in (Gather finds it by Matches).
func served(f Facts) (Verdict, bool) {
	if f.Serving == nil || !f.OptedIn {
		return Verdict{}, false
	}
	if IsLegacy(f.Claim) {
		return Verdict{State: Adopt, Pod: f.Serving}, true
	}
	return Verdict{State: Served, Pod: f.Serving}, true
}

// inGrace holds a claim nothing holds yet until its grace ends: an admission creates the claim
// before the API server stores the pod.
func inGrace(f Facts) (Verdict, bool) {
	until := f.Claim.CreationTimestamp.Add(f.Grace)
	return Verdict{State: Pending, Until: until}, f.Now.Before(until)
}

// IsLegacy says whether claim was made by an operator before DataNetworks: no network, in its
// pod's namespace, bound by an owner reference.
func IsLegacy(claim *fsv1.AddressClaim) bool { return claim.Spec.Network == "" }

// Binding is the pod a claim is for: its namespace and name (a generateName and "*" until the
// claim is bound) and, once bound, its UID.
type Binding struct {
	Namespace, Name string
	UID             types.UID
}

// BoundTo is the pod claim is for: spec.podNamespace, spec.pod and spec.podUID, or for a legacy
// claim its namespace and its pod owner (or, not bound yet, spec.pod).
func BoundTo(claim *fsv1.AddressClaim) Binding {
	if !IsLegacy(claim) {
		return Binding{Namespace: claim.Spec.PodNamespace, Name: claim.Spec.Pod, UID: types.UID(claim.Spec.PodUID)}
	}
	if ref := PodOwner(claim); ref != nil {
		return Binding{Namespace: claim.Namespace, Name: ref.Name, UID: ref.UID}
	}
	return Binding{Namespace: claim.Namespace, Name: claim.Spec.Pod}
}

// Gather reads from r what Decide needs on claim: the pod it is bound to, or the pod that may
// bind it and whether that pod's namespace opted in.
func Gather(ctx context.Context, r client.Reader, claim *fsv1.AddressClaim, now time.Time, grace time.Duration) (Facts, error) {
	f := Facts{Claim: claim, Now: now, Grace: grace}
	if claim.DeletionTimestamp != nil {
		return f, nil
	}
	if b := BoundTo(claim); b.UID != "" {
		pod := &corev1.Pod{}
		err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Name}, pod)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return f, fmt.Errorf("read pod %s/%s: %w", b.Namespace, b.Name, err)
		default:
			f.Holder = pod
		}
		return f, nil
	}
	pod, err := Serving(ctx, r, claim)
	if err != nil || pod == nil {
		return f, err
	}
	f.Serving = pod
	f.OptedIn, err = OptedIn(ctx, r, pod.Namespace)
	return f, err
}

// OptedIn says whether namespace ns is labelled for injection (its metadata alone is read).
func OptedIn(ctx context.Context, r client.Reader, ns string) (bool, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Get(ctx, client.ObjectKey{Name: ns}, meta); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return meta.Labels[fsv1.InjectionLabel] == "enabled", nil
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

// PodOwner is the pod that owns claim (a legacy claim's binding), or nil.
func PodOwner(claim *fsv1.AddressClaim) *metav1.OwnerReference {
	for i, ref := range claim.OwnerReferences {
		if ref.Kind == "Pod" && ref.APIVersion == "v1" {
			return &claim.OwnerReferences[i]
		}
	}
	return nil
}

// Matches says whether pod may bind claim: a pod of the claim's namespace and stack, of the name
// the claim was made for (a name its generateName begins, for a claim made before the name was
// chosen), whose addresses annotation lists the claim's address. Another pod that names the
// address (its annotation is its own to write) never gets the claim.
func Matches(claim *fsv1.AddressClaim, pod *corev1.Pod) bool {
	want, err := netip.ParseAddr(claim.Spec.Address)
	b := BoundTo(claim)
	if err != nil || b.Name == "" || pod.Namespace != b.Namespace || pod.Labels[fsv1.StackLabel] != claim.Spec.StackInstance {
		return false
	}
	if prefix, generated := strings.CutSuffix(b.Name, "*"); generated {
		if !strings.HasPrefix(pod.Name, prefix) {
			return false
		}
	} else if pod.Name != b.Name {
		return false
	}
	addrs, err := podcontract.ParseAddresses(pod.Annotations[podcontract.AddressesAnnotation])
	return err == nil && slices.ContainsFunc(addrs, func(s podcontract.ServedAddress) bool { return s.Addr == want.Unmap() })
}

// Serving is the oldest pod Matches finds for claim, or nil. Pods being deleted still serve it.
func Serving(ctx context.Context, r client.Reader, claim *fsv1.AddressClaim) (*corev1.Pod, error) {
	if _, err := netip.ParseAddr(claim.Spec.Address); err != nil {
		return nil, fmt.Errorf("address claim %s: address %q: %w", claim.Name, podcontract.Printable(claim.Spec.Address), err)
	}
	b := BoundTo(claim)
	if b.Namespace == "" || b.Name == "" {
		return nil, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(b.Namespace), client.MatchingLabels{fsv1.StackLabel: claim.Spec.StackInstance}); err != nil {
		return nil, fmt.Errorf("list the pods of StackInstance %s/%s: %w", b.Namespace, claim.Spec.StackInstance, err)
	}
	var best *corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; Matches(claim, p) && (best == nil || Older(p, best)) {
			best = p
		}
	}
	return best, nil
}

// Older orders two pods that want one address: the older first, then by name (a cache may hold
// no creation time).
func Older(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}
