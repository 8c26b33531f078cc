// Package claims holds the addresses of a data network apart, across the cluster: the admission
// webhook claims each address of a pod (an AddressClaim in the operator's namespace, named after
// the network and the address) and the operator's controller binds each claim to its pod by UID,
// and deletes the claims no pod holds.
package claims

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The injector claims every static and pool address of a pod it injects, in the operator's
// namespace only.
// +kubebuilder:rbac:groups=kubefstack.io,resources=addressclaims,verbs=create;delete,namespace=kube-fstack-system

// DefaultGrace is how long a claim may stay without a pod holding it before anyone may take it
// back (--claim-grace). Short, since anyone who reaches the webhook with a forged
// AdmissionReview holds an address for that long; an admission slower than it (the API server
// gives a request 60 s) ends in a pod whose claim the controller makes again, if the address is
// still free (and warns, AddressConflict, if not).
const DefaultGrace = 15 * time.Second

// Claimer claims a pod's addresses at admission by creating one AddressClaim per address, in the
// operator's namespace, named after the network and the address: the API server lets exactly one
// creation of a name succeed, whichever replica of the webhook asks, whatever each replica's
// cache says and whatever namespace or stack asks, so two pods never get one address of a
// network. What a replica knows (its cache of claims) only spares it the creations bound to fail.
type Claimer struct {
	// Writer creates and deletes claims (the manager's client: its writes go to the API server).
	Writer client.Writer
	// Cached lists a network's claims (the manager's cache), to skip the addresses known taken.
	Cached client.Reader
	// Live reads a claim and the pods that may hold it from the API server, when a name is taken.
	Live client.Reader
	// Namespace is the operator's, where every claim lives.
	Namespace string
	// Grace is how long a claim no pod holds is kept; zero is DefaultGrace.
	Grace time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	// The admissions one replica answers at once share what they learnt, so that they do not
	// all try the same first free address: the names being created here (inflight) and the
	// names found taken or created here, until the cache has surely seen them (recent).
	mu       sync.Mutex
	inflight map[string]bool
	recent   map[string]time.Time
}

// recentFor is how long a name created or found taken here is skipped without asking: the
// cache sees a claim within this (it is a watch), and a released one is served again after it.
const recentFor = 30 * time.Second

// reserve marks name as being created here, unless it is known taken; false means skip it.
func (c *Claimer) reserve(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.initMaps()
	now := c.now()
	for n, at := range c.recent {
		if now.Sub(at) > recentFor {
			delete(c.recent, n)
		}
	}
	if _, known := c.recent[name]; known || c.inflight[name] {
		return false
	}
	c.inflight[name] = true
	return true
}

func (c *Claimer) initMaps() {
	if c.inflight == nil {
		c.inflight, c.recent = map[string]bool{}, map[string]time.Time{}
	}
}

// settle ends the creation of name here; taken says it now exists (created, or found).
func (c *Claimer) settle(name string, taken bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.initMaps()
	delete(c.inflight, name)
	if taken {
		c.recent[name] = c.now()
	} else {
		delete(c.recent, name)
	}
}

// Claimed is what Claim took for one pod: the addresses, in the order of the needs, and the
// claims it created.
type Claimed struct {
	Addrs  []netip.Addr
	claims []*fsv1.AddressClaim
}

// For is the pod an admission claims for: its namespace, stack, and name (its generateName and
// "*" when the name is not chosen yet).
type For struct {
	Namespace, Stack, Pod string
	DryRun                bool
}

// Claim takes an address for each need of the stack's pod: the static address itself, or the
// first free one of the pool, on the need's network. A refusal (a need on no network, the static
// address held by another pod, a full pool) is an *inject.RejectError; on any error the claims
// made so far are released. A dry run creates nothing and answers with the addresses a real
// admission would try first.
func (c *Claimer) Claim(ctx context.Context, pod For, needs []inject.AddressNeed) (*Claimed, error) {
	if err := networksNamed(pod.Stack, needs); err != nil {
		return nil, err
	}
	out := &Claimed{}
	taken, listed := map[string]bool{}, map[string]bool{}
	for _, n := range needs {
		var a netip.Addr
		var err error
		if n.Pool == nil {
			a, err = c.claimStatic(ctx, pod, n, out)
		} else {
			if !listed[n.Network] {
				listed[n.Network] = true
				err = c.cachedClaims(ctx, n.Network, taken)
			}
			if err == nil {
				a, err = c.claimFromPool(ctx, pod, n, taken, out)
			}
		}
		if err != nil {
			c.Release(ctx, out)
			return nil, err
		}
		out.Addrs = append(out.Addrs, a)
	}
	return out, nil
}

// networksNamed refuses the needs on no network: a claim is a network's, so an address on none
// cannot be held apart from anyone's.
func networksNamed(stack string, needs []inject.AddressNeed) error {
	var errs field.ErrorList
	for _, n := range needs {
		if n.Network != "" {
			continue
		}
		errs = append(errs, field.Required(field.NewPath("metadata", "labels").Key(fsv1.StackLabel), fmt.Sprintf(
			"StackInstance %q's port %q (spec.ports[%d]) names no DataNetwork and the operator has no default, so its address (%s) cannot be held: "+
				"set spec.ports[%d].dataNetwork to the DataNetwork the port is on (kubectl get datanetworks), "+
				"or start the operator with --default-data-network (the chart's dataNetwork.name)", stack, n.PortName, n.Port, n.Field, n.Port)))
		break // one port's message says it for all
	}
	if len(errs) > 0 {
		return &inject.RejectError{Stack: stack, Errs: errs}
	}
	return nil
}

// Release deletes the claims of an admission that did not end in a pod (a later refusal). What
// it cannot delete the operator takes back after the grace.
func (c *Claimer) Release(ctx context.Context, cl *Claimed) {
	if c == nil || cl == nil {
		return
	}
	for _, claim := range cl.claims {
		c.settle(claim.Name, false)
		err := c.Writer.Delete(ctx, claim, client.Preconditions{UID: &claim.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Info("could not release an address claim; the operator takes it back later", "claim", claim.Name, "error", err.Error())
		}
	}
	cl.claims = nil
}

func (c *Claimer) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Claimer) grace() time.Duration {
	if c.Grace > 0 {
		return c.Grace
	}
	return DefaultGrace
}

// cachedClaims adds the names of the network's cached claims to taken.
func (c *Claimer) cachedClaims(ctx context.Context, network string, taken map[string]bool) error {
	var list fsv1.AddressClaimList
	if err := c.Cached.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{podcontract.ClaimNetworkLabel: network}); err != nil {
		return fmt.Errorf("list the address claims of DataNetwork %q: %w", network, err)
	}
	for i := range list.Items {
		taken[list.Items[i].Name] = true
	}
	return nil
}

// New is the claim of addr on network for the pod of stack that serves it on port, in the
// operator's namespace ns: the one shape the webhook and the controller make.
func New(ns, network string, addr netip.Addr, stack, port string, pod Binding) *fsv1.AddressClaim {
	return &fsv1.AddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fsv1.NetworkAddressClaimName(network, addr),
			Labels: map[string]string{podcontract.ClaimNetworkLabel: network}},
		Spec: fsv1.AddressClaimSpec{Network: network, PodNamespace: pod.Namespace, PodUID: string(pod.UID), StackInstance: stack,
			Address: addr.Unmap().String(), Port: port, Pod: pod.Name},
	}
}

// create makes the claim of a; ok is false when its name exists already.
func (c *Claimer) create(ctx context.Context, pod For, n inject.AddressNeed, a netip.Addr, out *Claimed) (bool, error) {
	claim := New(c.Namespace, n.Network, a, pod.Stack, n.PortName, Binding{Namespace: pod.Namespace, Name: pod.Pod})
	err := c.Writer.Create(ctx, claim)
	switch {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("claim address %s of DataNetwork %q for StackInstance %q: %w", a, n.Network, pod.Stack, err)
	}
	out.claims = append(out.claims, claim)
	return true, nil
}

func (c *Claimer) claimStatic(ctx context.Context, pod For, n inject.AddressNeed, out *Claimed) (netip.Addr, error) {
	a := n.Static.Addr()
	name := fsv1.NetworkAddressClaimName(n.Network, a)
	// Twice at most: the second time after taking back a claim whose pod is gone.
	for range 2 {
		if !pod.DryRun {
			ok, err := c.create(ctx, pod, n, a, out)
			if err != nil || ok {
				return a, err
			}
		}
		holder, err := c.holder(ctx, name, pod.Namespace)
		if err != nil || holder != "" {
			return a, staticTaken(pod, n, a, holder, err)
		}
		if pod.DryRun {
			return a, nil
		}
	}
	return a, fmt.Errorf("claim address %s for StackInstance %q: its claim keeps coming back", a, pod.Stack)
}

// staticTaken is the refusal of a static address holder holds (or err, reading who does).
func staticTaken(pod For, n inject.AddressNeed, a netip.Addr, holder string, err error) error {
	path := field.NewPath("metadata", "labels").Key(fsv1.StackLabel)
	switch {
	case err != nil:
		return err
	case holder == "a pod of another namespace":
		return &inject.RejectError{Stack: pod.Stack, Errs: field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"StackInstance %q's static address %s (%s.address) is held on DataNetwork %q by %s, and an address of a network has one holder in the cluster: "+
				"give the port another address, one the network grants this namespace (ask the platform team which)", pod.Stack, a, n.Field, n.Network, holder))}}
	}
	return &inject.RejectError{Stack: pod.Stack, Errs: field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"StackInstance %q's static address %s (%s.address) is served by %s, and a static address serves one pod: "+
			"to run several pods give the port a pool (from: Pool with pool.ranges, each pod its own address), "+
			"or replace pods one at a time (a Deployment with strategy Recreate)", pod.Stack, a, n.Field, holder))}}
}

func (c *Claimer) claimFromPool(ctx context.Context, pod For, n inject.AddressNeed, taken map[string]bool, out *Claimed) (netip.Addr, error) {
	var got netip.Addr
	var err error
	try := func(a netip.Addr) bool {
		name := fsv1.NetworkAddressClaimName(n.Network, a)
		if taken[name] || slices.ContainsFunc(out.claims, func(cl *fsv1.AddressClaim) bool { return cl.Name == name }) {
			return true
		}
		if pod.DryRun {
			got = a
			return false
		}
		if !c.reserve(name) {
			return true
		}
		ok, cerr := c.create(ctx, pod, n, a, out)
		c.settle(name, cerr == nil)
		if ok || cerr != nil {
			got, err = a, cerr
			return false
		}
		taken[name] = true
		return true
	}
	n.Pool.Addresses(try)
	if got.IsValid() || err != nil {
		return got, err
	}
	// Every address has a claim: take back those no pod holds any longer (the controller has not
	// yet), and try them again.
	var stale []netip.Addr
	n.Pool.Addresses(func(a netip.Addr) bool {
		holder, herr := c.holder(ctx, fsv1.NetworkAddressClaimName(n.Network, a), pod.Namespace)
		if herr != nil {
			err = herr
			return false
		}
		if holder == "" {
			stale = append(stale, a)
		}
		return true
	})
	if err != nil {
		return got, err
	}
	for _, a := range stale {
		delete(taken, fsv1.NetworkAddressClaimName(n.Network, a))
		c.settle(fsv1.NetworkAddressClaimName(n.Network, a), false)
		if !try(a) {
			return got, err
		}
	}
	return got, poolFull(pod, n)
}

// poolFull is the refusal of a pool whose every address is held. Tenants cannot read the claims
// (the operator's namespace): the addresses their own pods hold are in the pods' annotation.
func poolFull(pod For, n inject.AddressNeed) error {
	return &inject.RejectError{Stack: pod.Stack, Errs: field.ErrorList{field.Forbidden(
		field.NewPath("metadata", "labels").Key(fsv1.StackLabel), fmt.Sprintf(
			"StackInstance %q's pool %s.pool is full: its %d addresses on DataNetwork %q are held by pods, of this stack or of any other that shares "+
				"the network (each pod of the stack lists its own in its %s annotation: kubectl describe pods -l %s=%s); "+
				"add addresses to pool.ranges, or scale the stack's pods down", pod.Stack, n.Field, n.Pool.Size(), n.Network,
			podcontract.AddressesAnnotation, fsv1.StackLabel, pod.Stack))}}
}

// holder names who holds the claim name, as seen from an admission of namespace ns (Verdict.
// HolderSeenFrom), or "" when nobody does any longer (the claim is gone, or was taken back here:
// Decide found it Free).
func (c *Claimer) holder(ctx context.Context, name, ns string) (string, error) {
	claim := &fsv1.AddressClaim{}
	if err := c.Live.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, claim); apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("read address claim %s: %w", name, err)
	}
	facts, err := Gather(ctx, c.Live, claim, c.now(), c.grace())
	if err != nil {
		return "", err
	}
	if v := Decide(facts); v.Held() {
		return v.HolderSeenFrom(ns), nil
	}
	gone, err := TakeBack(ctx, c.Writer, claim)
	switch {
	case err != nil:
		return "", fmt.Errorf("take back address claim %s: %w", name, err)
	case !gone:
		// Someone changed it meanwhile (the operator bound it): held.
		return "a pod being created", nil
	}
	return "", nil
}
