package controller

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
)

// The cache indexes the claim controller and the EndpointSlice controller read by. A claim lives
// in the operator's namespace and its pod in another, so neither can find the other by namespace
// and label: a pod finds the claims of the addresses it serves (ClaimAddressIndex), which covers
// a deleted pod too (its last state carries its addresses), a claim the pods that serve its
// address (PodAddressIndex), and a Service the claims of its stack's pods (ClaimStackIndex).
const (
	// ClaimAddressIndex indexes AddressClaims by their address, on any network (legacy claims
	// included).
	ClaimAddressIndex = "addressclaim.spec.address"
	// ClaimStackIndex indexes AddressClaims by the namespace and stack of their pod,
	// "<namespace>/<stack>".
	ClaimStackIndex = "addressclaim.spec.podnamespace-stack"
	// PodAddressIndex indexes the cached pods by the addresses their annotation says they serve.
	PodAddressIndex = "pod.served-address"
)

// IndexClaimsAndPods registers the indexes with the manager's cache, before it starts.
func IndexClaimsAndPods(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &fsv1.AddressClaim{}, ClaimAddressIndex, func(o client.Object) []string {
		if a, err := netip.ParseAddr(o.(*fsv1.AddressClaim).Spec.Address); err == nil {
			return []string{a.Unmap().String()}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &fsv1.AddressClaim{}, ClaimStackIndex, func(o client.Object) []string {
		c := o.(*fsv1.AddressClaim)
		return []string{StackKey(claims.BoundTo(c).Namespace, c.Spec.StackInstance)}
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &corev1.Pod{}, PodAddressIndex, func(o client.Object) []string {
		addrs, err := podcontract.ParseAddresses(o.GetAnnotations()[podcontract.AddressesAnnotation])
		if err != nil {
			return nil
		}
		out := make([]string, 0, len(addrs))
		for _, a := range addrs {
			out = append(out, a.Addr.String())
		}
		return out
	})
}

// StackKey is ClaimStackIndex's value for a stack of a namespace.
func StackKey(ns, stack string) string { return ns + "/" + stack }
