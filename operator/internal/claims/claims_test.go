package claims_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
)

// needs are the address needs of the vhost-user sample in ns on network (its static
// 10.99.0.10, or a pool of 10.56.0.10-12), as the injector reads them.
func needs(t *testing.T, ns, network string, pool bool) []inject.AddressNeed {
	t.Helper()
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace(ns, "web"), func(si *fsv1.StackInstance) {
		if pool {
			si.Spec.Ports[0].IPv4 = &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: "10.56.0.1",
				Pool: &fsv1.IPPool{Ranges: []string{"10.56.0.10-10.56.0.12"}, PrefixLength: 24}}
		}
	})
	cfg := inject.DefaultConfig()
	cfg.DefaultDataNetwork = network
	prep, err := inject.Prepare(si, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return prep.AddressNeeds()
}

// claimer claims through a fake API server. It stamps no creation time, so its clock stands at
// the zero time too: every claim no pod holds is within its grace.
func claimer(objs ...client.Object) (*claims.Claimer, client.Client) {
	c := fake.NewClientBuilder().WithScheme(manager.Scheme()).WithObjects(objs...).Build()
	return &claims.Claimer{Writer: c, Cached: c, Live: c, Namespace: "ops", Now: func() time.Time { return time.Time{} }}, c
}

// A port on no network cannot be held apart from anyone's: refused, naming the field and both
// fixes, and nothing is claimed.
func TestClaimRefusesAPortOnNoNetwork(t *testing.T) {
	cl, c := claimer()
	_, err := cl.Claim(context.Background(), claims.For{Namespace: "ns", Stack: "web", Pod: "web-1"}, needs(t, "ns", "", false))
	for _, want := range []string{"spec.ports[0].dataNetwork", "--default-data-network", "names no DataNetwork"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want a refusal naming %q", err, want)
		}
	}
	var list fsv1.AddressClaimList
	if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("claims made: %v, %v", list.Items, err)
	}
}

// One address of a network has one holder in the cluster: the claim lives in the operator's
// namespace under the network's name, so another namespace's static address is refused without
// naming the pod that holds it, the same address on another network is free, and a pool skips
// what another namespace holds.
func TestClaimsAreTheNetworksAcrossNamespaces(t *testing.T) {
	ctx := context.Background()
	holder := pod("a", "web-1", "uid-1", "0:data=10.99.0.10")
	held := claims.New("ops", "net", netip.MustParseAddr("10.99.0.10"), "web", "data", claims.Binding{Namespace: "a", Name: "web-1", UID: "uid-1"})
	pooled := pod("a", "web-2", "uid-2", "0:data=10.56.0.10")
	heldPool := claims.New("ops", "net", netip.MustParseAddr("10.56.0.10"), "web", "data", claims.Binding{Namespace: "a", Name: "web-2", UID: "uid-2"})
	cl, c := claimer(holder, held, pooled, heldPool)

	_, err := cl.Claim(ctx, claims.For{Namespace: "b", Stack: "web", Pod: "web-1"}, needs(t, "b", "net", false))
	if err == nil || !strings.Contains(err.Error(), "held on DataNetwork \"net\" by a pod of another namespace") || strings.Contains(err.Error(), "web-1") {
		t.Fatalf("another namespace's static address: got %v, want refused without the holder's name", err)
	}
	_, err = cl.Claim(ctx, claims.For{Namespace: "a", Stack: "web", Pod: "web-3"}, needs(t, "a", "net", false))
	if err == nil || !strings.Contains(err.Error(), "is served by pod web-1") {
		t.Fatalf("the same namespace's static address: got %v, want refused naming the pod", err)
	}
	got, err := cl.Claim(ctx, claims.For{Namespace: "b", Stack: "web", Pod: "web-*"}, needs(t, "b", "other-net", false))
	if err != nil || got.Addrs[0].String() != "10.99.0.10" {
		t.Fatalf("the same address on another network: got %v, %v", got, err)
	}
	got, err = cl.Claim(ctx, claims.For{Namespace: "b", Stack: "web", Pod: "web-*"}, needs(t, "b", "net", true))
	if err != nil || got.Addrs[0].String() != "10.56.0.11" {
		t.Fatalf("a pool whose first address another namespace holds: got %v, %v, want 10.56.0.11", got, err)
	}
	made := &fsv1.AddressClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "net.10-56-0-11"}, made); err != nil {
		t.Fatal(err)
	}
	if s := made.Spec; s.Network != "net" || s.PodNamespace != "b" || s.StackInstance != "web" || s.Port != "data" || s.Pod != "web-*" ||
		s.PodUID != "" || made.Labels["kubefstack.io/data-network"] != "net" {
		t.Fatalf("the claim made: %+v, labels %v", s, made.Labels)
	}
	for i := range 2 {
		_, err = cl.Claim(ctx, claims.For{Namespace: "b", Stack: "web", Pod: fmt.Sprintf("more-%d", i)}, needs(t, "b", "net", true))
	}
	if err == nil || !strings.Contains(err.Error(), "is full") || !strings.Contains(err.Error(), "kubectl describe pods -l kubefstack.io/stack=web") {
		t.Fatalf("the pool's third address taken: got %v, want full, pointing at the pods' annotation", err)
	}
}
