// Package claims holds the addresses a StackInstance's pods serve apart: the admission webhook
// claims each address of a pod (an AddressClaim named after the stack and the address) and the
// operator's controller binds each claim to its pod and deletes the claims no pod holds.
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
)

// The injector claims every static and pool address of a pod it injects.
// +kubebuilder:rbac:groups=kubefstack.io,resources=addressclaims,verbs=get;list;watch;create;delete

// Grace is how long a claim may stay without a pod holding it before anyone may take it
// back: longer than any admission can take to end in a stored pod (the API server gives a
// request 60 s), so a claim is never taken back from a pod still being created.
const Grace = 2 * time.Minute

// Claimer claims a pod's addresses at admission by creating one AddressClaim per address,
// named after the stack and the address: the API server lets exactly one creation of a name
// succeed, whichever replica of the webhook asks and whatever each replica's cache says, so two
// pods never get one address. What a replica knows (its cache of claims) only spares it the
// creations bound to fail.
type Claimer struct {
	// Writer creates and deletes claims (the manager's client: its writes go to the API server).
	Writer client.Writer
	// Cached lists the stack's claims (the manager's cache), to skip the addresses known taken.
	Cached client.Reader
	// Live reads a claim and the pods that may hold it from the API server, when a name is taken.
	Live client.Reader
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

// Claim takes an address for each need of the stack's pod: the static address itself, or the
// first free one of the pool. A refusal (the static address held by another pod, a full pool)
// is an *inject.RejectError; on any error the claims made so far are released. A dry run
// creates nothing and answers with the addresses a real admission would try first.
func (c *Claimer) Claim(ctx context.Context, ns, stack, pod string, needs []inject.AddressNeed, dryRun bool) (*Claimed, error) {
	out := &Claimed{}
	var taken map[string]bool
	for _, n := range needs {
		var a netip.Addr
		var err error
		if n.Pool == nil {
			a, err = c.claimStatic(ctx, ns, stack, pod, n, dryRun, out)
		} else {
			if taken == nil {
				if taken, err = c.cachedClaims(ctx, ns, stack); err != nil {
					c.Release(ctx, out)
					return nil, err
				}
			}
			a, err = c.claimFromPool(ctx, ns, stack, pod, n, taken, dryRun, out)
		}
		if err != nil {
			c.Release(ctx, out)
			return nil, err
		}
		out.Addrs = append(out.Addrs, a)
	}
	return out, nil
}

// Release deletes the claims of an admission that did not end in a pod (a later refusal). What
// it cannot delete the operator takes back after Grace.
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

func (c *Claimer) cachedClaims(ctx context.Context, ns, stack string) (map[string]bool, error) {
	var list fsv1.AddressClaimList
	if err := c.Cached.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{fsv1.StackLabel: stack}); err != nil {
		return nil, fmt.Errorf("list the address claims of StackInstance %q: %w", stack, err)
	}
	taken := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		taken[list.Items[i].Name] = true
	}
	return taken, nil
}

// create makes the claim of a; ok is false when its name exists already.
func (c *Claimer) create(ctx context.Context, ns, stack, pod string, n inject.AddressNeed, a netip.Addr, out *Claimed) (bool, error) {
	claim := &fsv1.AddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fsv1.AddressClaimName(stack, a),
			Labels: map[string]string{fsv1.StackLabel: stack}},
		Spec: fsv1.AddressClaimSpec{StackInstance: stack, Address: a.String(), Port: n.PortName, Pod: pod},
	}
	err := c.Writer.Create(ctx, claim)
	switch {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("claim address %s for StackInstance %q: %w", a, stack, err)
	}
	out.claims = append(out.claims, claim)
	return true, nil
}

func (c *Claimer) claimStatic(ctx context.Context, ns, stack, pod string, n inject.AddressNeed, dryRun bool, out *Claimed) (netip.Addr, error) {
	a := n.Static.Addr()
	// Twice at most: the second time after taking back a claim whose pod is gone.
	for range 2 {
		if dryRun {
			holder, err := c.holder(ctx, ns, fsv1.AddressClaimName(stack, a))
			if err != nil || holder == "" {
				return a, err
			}
			return a, staticTaken(stack, n, a, holder)
		}
		ok, err := c.create(ctx, ns, stack, pod, n, a, out)
		if err != nil || ok {
			return a, err
		}
		holder, err := c.holder(ctx, ns, fsv1.AddressClaimName(stack, a))
		if err != nil {
			return a, err
		}
		if holder != "" {
			return a, staticTaken(stack, n, a, holder)
		}
	}
	return a, fmt.Errorf("claim address %s for StackInstance %q: its claim keeps coming back", a, stack)
}

func staticTaken(stack string, n inject.AddressNeed, a netip.Addr, holder string) error {
	return &inject.RejectError{Stack: stack, Errs: field.ErrorList{field.Forbidden(
		field.NewPath("metadata", "labels").Key(fsv1.StackLabel), fmt.Sprintf(
			"StackInstance %q's static address %s (%s.address) is served by %s, and a static address serves one pod: "+
				"to run several pods give the port a pool (from: Pool with pool.ranges, each pod its own address), "+
				"or replace pods one at a time (a Deployment with strategy Recreate)", stack, a, n.Field, holder))}}
}

func (c *Claimer) claimFromPool(ctx context.Context, ns, stack, pod string, n inject.AddressNeed, taken map[string]bool, dryRun bool, out *Claimed) (netip.Addr, error) {
	var got netip.Addr
	var err error
	try := func(a netip.Addr) bool {
		name := fsv1.AddressClaimName(stack, a)
		if taken[name] || slices.ContainsFunc(out.claims, func(cl *fsv1.AddressClaim) bool { return cl.Name == name }) {
			return true
		}
		if dryRun {
			got = a
			return false
		}
		if !c.reserve(name) {
			return true
		}
		ok, cerr := c.create(ctx, ns, stack, pod, n, a, out)
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
	// Every address has a claim: take back those whose pod is gone (the garbage collector, or
	// the operator, has not deleted them yet), and try them again.
	var stale []netip.Addr
	n.Pool.Addresses(func(a netip.Addr) bool {
		holder, herr := c.holder(ctx, ns, fsv1.AddressClaimName(stack, a))
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
		delete(taken, fsv1.AddressClaimName(stack, a))
		c.settle(fsv1.AddressClaimName(stack, a), false)
		if !try(a) {
			return got, err
		}
	}
	return got, &inject.RejectError{Stack: stack, Errs: field.ErrorList{field.Forbidden(
		field.NewPath("metadata", "labels").Key(fsv1.StackLabel), fmt.Sprintf(
			"StackInstance %q's pool %s.pool is full: its %d addresses are held by pods of the stack (kubectl get addressclaims -l %s=%s); "+
				"add addresses to pool.ranges, or scale the stack's pods down", stack, n.Field, n.Pool.Size(), fsv1.StackLabel, stack))}}
}

// holder names who holds the claim name: "pod <name>" for the pod that owns or serves it, "a
// pod being created" for a claim in its grace, or "" when nobody does any longer (the claim is
// gone, or was taken back here: Decide found it Free).
func (c *Claimer) holder(ctx context.Context, ns, name string) (string, error) {
	claim := &fsv1.AddressClaim{}
	if err := c.Live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim); apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("read address claim %s: %w", name, err)
	}
	facts, err := Gather(ctx, c.Live, claim, c.now(), Grace)
	if err != nil {
		return "", err
	}
	if v := Decide(facts); v.Held() {
		return v.Holder, nil
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
