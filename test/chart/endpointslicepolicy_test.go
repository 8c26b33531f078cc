package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testOperatorEndpointSlicePolicy (issue 38): with the installed chart, the operator's
// ServiceAccount (RBAC: write EndpointSlices in every namespace) may write a slice shaped as its
// own, labelled managed-by its controller and named for a Service that controls it, and nothing
// else: not Kubernetes' own slices, not one without the label or the Service's ownership, not a
// takeover of another controller's slice.
func testOperatorEndpointSlicePolicy(t *testing.T, c client.Client, admin *rest.Config) {
	ctx := context.Background()
	const ns, ours = "tenant-eps", "endpointslice-controller.kubefstack.io"
	as := asOperator(t, c, admin, ns)
	yes := true
	slice := func(name, managedBy, service, owner string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}},
			AddressType: discoveryv1.AddressTypeIPv4}
		if managedBy != "" {
			s.Labels[discoveryv1.LabelManagedBy] = managedBy
		}
		if service != "" {
			s.Labels[discoveryv1.LabelServiceName] = service
		}
		if owner != "" {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: owner, UID: "5e1c3d2a-1", Controller: &yes}}
		}
		return s
	}
	create := func(s *discoveryv1.EndpointSlice) error {
		_, err := as.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// The policy is enforced once the API server has loaded it: wait for its first refusal.
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = create(slice("k8s", "endpointslice-controller.k8s.io", "web", "web")); err != nil {
			break
		}
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "managed-by=endpointslice-controller.kubefstack.io") {
		t.Fatalf("the operator created a slice managed by Kubernetes' controller: %v, want refused by its policy", err)
	}
	for _, bad := range []struct {
		s    *discoveryv1.EndpointSlice
		want string
	}{
		{slice("a", "", "web", "web"), "managed-by=endpointslice-controller.kubefstack.io"},
		{slice("b", ours, "", "web"), "kubernetes.io/service-name=<service>"},
		{slice("c", ours, "web", ""), "whose controller is that Service"},
		{slice("d", ours, "web", "other"), "whose controller is that Service"},
	} {
		if err := create(bad.s); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("the operator created slice %s labelled %v owned by %v: %v, want refused with %q", bad.s.Name, bad.s.Labels,
				bad.s.OwnerReferences, err, bad.want)
		}
	}
	if err := create(slice("web-ours", ours, "web", "web")); err != nil {
		t.Errorf("the operator may not create its own slice: %v", err)
	}
	// Kubernetes' own slice of a Service: the operator can neither relabel it as its own nor
	// delete it.
	theirs := slice("web-k8s", "endpointslice-controller.k8s.io", "web", "web")
	if err := c.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Labels[discoveryv1.LabelManagedBy] = ours
	if _, err := as.DiscoveryV1().EndpointSlices(ns).Update(ctx, theirs, metav1.UpdateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "before and after") {
		t.Errorf("the operator took over Kubernetes' slice: %v, want refused", err)
	}
	if err := as.DiscoveryV1().EndpointSlices(ns).Delete(ctx, "web-k8s", metav1.DeleteOptions{}); err == nil ||
		!strings.Contains(err.Error(), "before and after") {
		t.Errorf("the operator deleted Kubernetes' slice: %v, want refused", err)
	}
}
