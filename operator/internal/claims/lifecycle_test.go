package claims_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
)

var created = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// claim is a claim of 10.56.0.10 on network net for pod web-1 of stack web in namespace ns, not
// bound yet, in the operator's namespace.
func claim(opts ...func(*fsv1.AddressClaim)) *fsv1.AddressClaim {
	c := claims.New("ops", "net", netip.MustParseAddr("10.56.0.10"), "web", "data", claims.Binding{Namespace: "ns", Name: "web-1"})
	c.CreationTimestamp = metav1.NewTime(created)
	for _, o := range opts {
		o(c)
	}
	return c
}

func boundTo(uid types.UID) func(*fsv1.AddressClaim) {
	return func(c *fsv1.AddressClaim) { c.Spec.PodUID = string(uid) }
}

func generated(prefix string) func(*fsv1.AddressClaim) {
	return func(c *fsv1.AddressClaim) { c.Spec.Pod = prefix + "*" }
}

// legacy is the claim as an operator before DataNetworks made it: in the pod's namespace, named
// after the stack, no network, owned by its pod once bound.
func legacy(c *fsv1.AddressClaim) {
	c.Namespace, c.Name, c.Labels = "ns", "web.10-56-0-10", map[string]string{fsv1.StackLabel: "web"}
	c.Spec.Network, c.Spec.PodNamespace = "", ""
}

func ownedBy(name string, uid types.UID) func(*fsv1.AddressClaim) {
	return func(c *fsv1.AddressClaim) {
		c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: uid})
	}
}

func deleting(c *fsv1.AddressClaim) {
	now := metav1.NewTime(created)
	c.DeletionTimestamp = &now
}

func pod(ns, name string, uid types.UID, serves string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Labels: map[string]string{fsv1.StackLabel: "web"}}}
	if serves != "" {
		p.Annotations = map[string]string{podcontract.AddressesAnnotation: serves}
	}
	return p
}

// Every branch of the one decision on a claim, which the webhook's take-back and the
// controller's release both ask.
func TestDecide(t *testing.T) {
	const grace = 15 * time.Second
	web1 := pod("ns", "web-1", "uid-1", "0:data=10.56.0.10")
	for _, tc := range []struct {
		name   string
		facts  claims.Facts
		state  claims.State
		holder string // as an admission of namespace ns sees it
	}{
		{"being deleted, even with a living holder", claims.Facts{Claim: claim(deleting, boundTo("uid-1")), Holder: web1},
			claims.Going, "a pod being deleted (its claim is going)"},
		{"its pod exists", claims.Facts{Claim: claim(boundTo("uid-1")), Holder: web1},
			claims.Held, "pod web-1"},
		{"its pod is gone", claims.Facts{Claim: claim(boundTo("uid-1"))},
			claims.Free, ""},
		{"its pod's name is a new pod's", claims.Facts{Claim: claim(boundTo("uid-0")), Holder: web1},
			claims.Free, ""},
		{"its pod is gone, within the grace", claims.Facts{Claim: claim(boundTo("uid-1")), Now: created},
			claims.Free, ""},
		{"not bound, its pod serves it (after the grace)", claims.Facts{Claim: claim(), Serving: web1, OptedIn: true, Now: created.Add(time.Hour)},
			claims.Served, "pod web-1"},
		{"not bound, a pod serves it in a namespace that did not opt in", claims.Facts{Claim: claim(), Serving: web1, Now: created.Add(time.Hour)},
			claims.Free, ""},
		{"not bound, nobody serves it, within the grace", claims.Facts{Claim: claim(), Now: created.Add(grace - time.Second)},
			claims.Pending, "a pod being created"},
		{"not bound, nobody serves it, the grace over", claims.Facts{Claim: claim(), Now: created.Add(grace)},
			claims.Free, ""},
		{"legacy, its owner exists: move it", claims.Facts{Claim: claim(legacy, ownedBy("web-1", "uid-1")), Holder: web1},
			claims.Adopt, "pod web-1"},
		{"legacy, its owner is gone", claims.Facts{Claim: claim(legacy, ownedBy("web-1", "uid-1"))},
			claims.Free, ""},
		{"legacy, not bound, its pod serves it: move it", claims.Facts{Claim: claim(legacy), Serving: web1, OptedIn: true, Now: created.Add(time.Hour)},
			claims.Adopt, "pod web-1"},
		{"legacy, not bound, within the grace", claims.Facts{Claim: claim(legacy), Now: created},
			claims.Pending, "a pod being created"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.facts.Grace = grace
			v := claims.Decide(tc.facts)
			if v.State != tc.state || v.HolderSeenFrom("ns") != tc.holder || v.Held() != (tc.state != claims.Free) {
				t.Errorf("got %v held=%v by %q, want %v by %q", v.State, v.Held(), v.HolderSeenFrom("ns"), tc.state, tc.holder)
			}
			if (tc.state == claims.Served || tc.state == claims.Adopt || tc.state == claims.Held) && v.Pod != web1 {
				t.Errorf("pod %v, want web-1", v.Pod)
			}
			if tc.state == claims.Pending && !v.Until.Equal(created.Add(grace)) {
				t.Errorf("pending until %v, want the end of the grace %v", v.Until, created.Add(grace))
			}
		})
	}
}

// An admission of another namespace learns that the address is held, never by whom, whether
// the pod exists or is being created.
func TestHolderSeenFromAnotherNamespace(t *testing.T) {
	for _, f := range []claims.Facts{
		{Claim: claim(boundTo("uid-1")), Holder: pod("ns", "web-1", "uid-1", "")},
		{Claim: claim(), Now: created, Grace: time.Minute},
	} {
		if got := claims.Decide(f).HolderSeenFrom("other"); got != "a pod of another namespace" {
			t.Errorf("seen from another namespace: %q", got)
		}
	}
}

// A claim binds only the pod it was made for: its namespace, stack, name (or generateName), and
// an annotation that lists its address. A pod that names the address in its annotation gets
// nothing else.
func TestMatches(t *testing.T) {
	serves := "0:data=10.56.0.10"
	for _, tc := range []struct {
		name  string
		claim *fsv1.AddressClaim
		pod   *corev1.Pod
		want  bool
	}{
		{"its pod", claim(), pod("ns", "web-1", "u", serves), true},
		{"another name", claim(), pod("ns", "web-2", "u", serves), false},
		{"another namespace", claim(), pod("other", "web-1", "u", serves), false},
		{"another stack", claim(), func() *corev1.Pod { p := pod("ns", "web-1", "u", serves); p.Labels[fsv1.StackLabel] = "x"; return p }(), false},
		{"another address", claim(), pod("ns", "web-1", "u", "0:data=10.56.0.11"), false},
		{"no annotation", claim(), pod("ns", "web-1", "u", ""), false},
		{"its generateName", claim(generated("web-7c9-")), pod("ns", "web-7c9-x2x4p", "u", serves), true},
		{"another generateName", claim(generated("web-7c9-")), pod("ns", "web-5d1-x2x4p", "u", serves), false},
		{"legacy, its pod", claim(legacy), pod("ns", "web-1", "u", serves), true},
	} {
		if got := claims.Matches(tc.claim, tc.pod); got != tc.want {
			t.Errorf("%s: Matches %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Gather reads the pod a bound claim is bound to, in the claim's pod namespace; and, only for a
// claim not bound, the oldest pod it was made for and whether its namespace opted in.
func TestGather(t *testing.T) {
	ctx := context.Background()
	older, newer := pod("ns", "web-a", "uid-0", "0:data=10.56.0.10"), pod("ns", "web-b", "uid-1", "0:data=10.56.0.10")
	older.CreationTimestamp = metav1.NewTime(created)
	newer.CreationTimestamp = metav1.NewTime(created.Add(time.Minute))
	other := pod("ns", "web-c", "uid-2", "0:data=10.56.0.11")
	forger := pod("ns", "forger", "uid-3", "0:data=10.56.0.10")
	forger.CreationTimestamp = metav1.NewTime(created.Add(-time.Hour))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{fsv1.InjectionLabel: "enabled"}}}
	r := fake.NewClientBuilder().WithScheme(manager.Scheme()).WithObjects(newer, older, other, forger, ns).Build()

	f, err := claims.Gather(ctx, r, claim(generated("web-")), created, claims.DefaultGrace)
	if err != nil || f.Holder != nil || f.Serving == nil || f.Serving.Name != "web-a" || !f.OptedIn {
		t.Fatalf("not bound: got holder %v, serving %v, opted in %v, %v; want the oldest pod of its generateName, web-a, opted in", f.Holder, f.Serving, f.OptedIn, err)
	}
	f, err = claims.Gather(ctx, r, claim(boundTo("uid-1"), func(c *fsv1.AddressClaim) { c.Spec.Pod = "web-b" }), created, claims.DefaultGrace)
	if err != nil || f.Holder == nil || f.Holder.Name != "web-b" || f.Serving != nil {
		t.Fatalf("bound: got holder %v, serving %v, %v; want web-b and no serving pod read", f.Holder, f.Serving, err)
	}
	f, err = claims.Gather(ctx, r, claim(legacy, ownedBy("web-b", "uid-1")), created, claims.DefaultGrace)
	if err != nil || f.Holder == nil || f.Holder.Name != "web-b" {
		t.Fatalf("legacy, owned: got holder %v, %v; want web-b", f.Holder, err)
	}
	f, err = claims.Gather(ctx, r, claim(boundTo("uid-9"), func(c *fsv1.AddressClaim) { c.Spec.Pod = "gone" }), created, claims.DefaultGrace)
	if err != nil || f.Holder != nil {
		t.Fatalf("pod gone: got holder %v, %v; want none", f.Holder, err)
	}
	if _, err := claims.Gather(ctx, r, claim(func(c *fsv1.AddressClaim) { c.Spec.Address = "nope" }), created, claims.DefaultGrace); err == nil {
		t.Fatal("a claim whose address does not parse: want an error")
	}
}

// A claim's name reads back as its network and address; no other name does.
func TestParseName(t *testing.T) {
	for _, a := range []string{"10.56.0.10", "2001:db8::11", "::ffff:10.0.0.1"} {
		addr := netip.MustParseAddr(a)
		network, got, ok := claims.ParseName(fsv1.NetworkAddressClaimName("net-1", addr))
		if !ok || network != "net-1" || got != addr.Unmap() {
			t.Errorf("%s: got %q %v %v", a, network, got, ok)
		}
	}
	for _, name := range []string{"web", "web.", ".10-0-0-1", "web.10-0-0-1.x", "net.2001-db8--11", "net.10-0-0-01"} {
		if _, _, ok := claims.ParseName(name); ok {
			t.Errorf("%q read as a claim's name", name)
		}
	}
}
