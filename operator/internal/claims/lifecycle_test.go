package claims_test

import (
	"context"
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

func claim(opts ...func(*fsv1.AddressClaim)) *fsv1.AddressClaim {
	c := &fsv1.AddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web.10-56-0-10", CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{fsv1.StackLabel: "web"}},
		Spec: fsv1.AddressClaimSpec{StackInstance: "web", Address: "10.56.0.10", Port: "data"},
	}
	for _, o := range opts {
		o(c)
	}
	return c
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

func pod(name string, uid types.UID, serves string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, Labels: map[string]string{fsv1.StackLabel: "web"}}}
	if serves != "" {
		p.Annotations = map[string]string{podcontract.AddressesAnnotation: serves}
	}
	return p
}

// Every branch of the one decision on a claim, which the webhook's take-back and the
// controller's release both ask.
func TestDecide(t *testing.T) {
	const grace = 2 * time.Minute
	web1 := pod("web-1", "uid-1", "0:data=10.56.0.10")
	for _, tc := range []struct {
		name   string
		facts  claims.Facts
		state  claims.State
		holder string
	}{
		{"being deleted, even with a living owner", claims.Facts{Claim: claim(deleting, ownedBy("web-1", "uid-1")), Owner: web1},
			claims.Going, "a pod being deleted (its claim is going)"},
		{"its owner exists", claims.Facts{Claim: claim(ownedBy("web-1", "uid-1")), Owner: web1},
			claims.Owned, "pod web-1"},
		{"its owner is gone", claims.Facts{Claim: claim(ownedBy("web-1", "uid-1"))},
			claims.Free, ""},
		{"its owner's name is a new pod's", claims.Facts{Claim: claim(ownedBy("web-1", "uid-0")), Owner: web1},
			claims.Free, ""},
		{"its owner is gone, within the grace", claims.Facts{Claim: claim(ownedBy("web-1", "uid-1")), Now: created},
			claims.Free, ""},
		{"no owner, a pod serves it (after the grace)", claims.Facts{Claim: claim(), Serving: web1, Now: created.Add(time.Hour)},
			claims.Served, "pod web-1"},
		{"no owner, nobody serves it, within the grace", claims.Facts{Claim: claim(), Now: created.Add(grace - time.Second)},
			claims.Pending, "a pod being created"},
		{"no owner, nobody serves it, the grace over", claims.Facts{Claim: claim(), Now: created.Add(grace)},
			claims.Free, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.facts.Grace = grace
			v := claims.Decide(tc.facts)
			if v.State != tc.state || v.Holder != tc.holder || v.Held() != (tc.state != claims.Free) {
				t.Errorf("got %v held=%v by %q, want %v by %q", v.State, v.Held(), v.Holder, tc.state, tc.holder)
			}
			if tc.state == claims.Served && v.Pod != tc.facts.Serving {
				t.Errorf("bind to %v, want the serving pod", v.Pod)
			}
			if tc.state == claims.Pending && !v.Until.Equal(created.Add(grace)) {
				t.Errorf("pending until %v, want the end of the grace %v", v.Until, created.Add(grace))
			}
		})
	}
}

// Gather reads the owner of an owned claim and, only for a claim no pod owns, the oldest pod
// serving its address.
func TestGather(t *testing.T) {
	ctx := context.Background()
	older, newer := pod("web-0", "uid-0", "0:data=10.56.0.10"), pod("web-1", "uid-1", "0:data=10.56.0.10")
	older.CreationTimestamp = metav1.NewTime(created)
	newer.CreationTimestamp = metav1.NewTime(created.Add(time.Minute))
	other := pod("web-2", "uid-2", "0:data=10.56.0.11")
	r := fake.NewClientBuilder().WithScheme(manager.Scheme()).WithObjects(newer, older, other).Build()

	f, err := claims.Gather(ctx, r, claim(), created, claims.Grace)
	if err != nil || f.Owner != nil || f.Serving == nil || f.Serving.Name != "web-0" {
		t.Fatalf("no owner: got owner %v, serving %v, %v; want the oldest serving pod, web-0", f.Owner, f.Serving, err)
	}
	f, err = claims.Gather(ctx, r, claim(ownedBy("web-1", "uid-1")), created, claims.Grace)
	if err != nil || f.Owner == nil || f.Owner.Name != "web-1" || f.Serving != nil {
		t.Fatalf("owned: got owner %v, serving %v, %v; want web-1 and no serving pod read", f.Owner, f.Serving, err)
	}
	f, err = claims.Gather(ctx, r, claim(ownedBy("gone", "uid-9")), created, claims.Grace)
	if err != nil || f.Owner != nil {
		t.Fatalf("owner gone: got owner %v, %v; want none", f.Owner, err)
	}
	if _, err := claims.Gather(ctx, r, claim(func(c *fsv1.AddressClaim) { c.Spec.Address = "nope" }), created, claims.Grace); err == nil {
		t.Fatal("a claim whose address does not parse: want an error")
	}
}
