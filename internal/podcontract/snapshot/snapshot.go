// Package snapshot owns the pod contract's one carrier whose type is the API's: the StackInstance
// spec an injected pod carries (podcontract.SpecAnnotation, with its API version in
// podcontract.SpecVersionAnnotation), which the dataplane reads back through the downward API.
// The injector writes it with Encode, after PinAddress has given each pool port the pod's own
// address; the supervisor reads it with Decode, the only decoder of it. It lives beside
// podcontract rather than in it because it needs api/v1alpha1, which fstack-cni and
// fstack-launcher must not link.
package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	kjson "sigs.k8s.io/json"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// MaxVersionBytes bounds a version value: a group/version is a few dozen bytes.
const MaxVersionBytes = 256

// Version is the SpecVersionAnnotation value of what Encode writes.
func Version() string { return fsv1.GroupVersion.String() }

// ErrTooLarge is the error of a snapshot over podcontract.MaxSpecSnapshot.
var ErrTooLarge = errors.New("larger than a pod's spec snapshot may be")

// Encode is the SpecAnnotation value of spec (defaults applied), and an error wrapping
// ErrTooLarge when it is over podcontract.MaxSpecSnapshot, with the value still returned so the
// caller can say how large it is.
func Encode(spec *fsv1.StackInstanceSpec) ([]byte, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if len(raw) > podcontract.MaxSpecSnapshot {
		return raw, fmt.Errorf("%d bytes, over %d: %w", len(raw), podcontract.MaxSpecSnapshot, ErrTooLarge)
	}
	return raw, nil
}

// CheckVersion refuses a snapshot written by an API version this binary does not read. An empty
// version (a pod whose injection wrote none, or whose downward-API volume did not project it)
// is a snapshot the operator wrote before it wrote versions, which was v1alpha1's. When a later
// API version changes the spec, this is where its snapshot is told apart and converted.
func CheckVersion(v string) error {
	if len(v) > MaxVersionBytes {
		return fmt.Errorf("the pod's %s annotation is more than %d bytes, longer than any API version: it was edited after admission; re-create the pod",
			podcontract.SpecVersionAnnotation, MaxVersionBytes)
	}
	v = strings.TrimSpace(v)
	if v == "" || v == Version() {
		return nil
	}
	return fmt.Errorf("the pod's %s annotation says the StackInstance spec is %q, which this binary does not read "+
		"(it reads %s): the pod was injected by a newer kube-fstack operator, or the annotation was edited; "+
		"run the dataplane image of the operator's release (upgrade spec.dataplane.image of the StackInstance, or the "+
		"operator's --dataplane-image), or re-create the pod",
		podcontract.SpecVersionAnnotation, podcontract.Printable(podcontract.Clip(v, 64)), Version())
}

// Decode reads a snapshot written under version the way the API server would accept the spec:
// the version first (CheckVersion), then bounded, one JSON object, field names matched exactly,
// no repeated fields. Unknown fields are ignored, as the API server's own clients do: the
// operator writes the spec with its defaults applied, so a newer operator's new defaulted field
// must not stop a pod whose StackInstance pins an older dataplane image; an ignored field
// changes nothing, so it gives an editor of the annotation no power. Anyone who may edit the pod
// can change the snapshot after admission: the caller still holds the result to the CRD's
// bounds and rules (render.Prepare) before anything is sized by it.
func Decode(raw []byte, version string) (*fsv1.StackInstanceSpec, error) {
	if err := CheckVersion(version); err != nil {
		return nil, err
	}
	if len(raw) > podcontract.MaxSpecSnapshot {
		return nil, fmt.Errorf("%d bytes, over %d: %w", len(raw), podcontract.MaxSpecSnapshot, ErrTooLarge)
	}
	var spec fsv1.StackInstanceSpec
	strict, err := kjson.UnmarshalStrict(raw, &spec, kjson.DisallowDuplicateFields)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON for a StackInstance spec: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("not a StackInstance spec as the API server stores it: %w", errors.Join(strict...))
	}
	return &spec, nil
}

// PinAddress gives spec.ports[port] the address p as a static one, in place of its pool of p's
// family: the snapshot a pod carries names the one address of the pool that pod holds, so the
// dataplane serves it, as it would a static address. The caller has checked that p is one of
// the pool's; a port without a pool of that family is left as it is (false).
func PinAddress(spec *fsv1.StackInstanceSpec, port int, p netip.Prefix) bool {
	if port < 0 || port >= len(spec.Ports) {
		return false
	}
	ps := &spec.Ports[port]
	switch {
	case p.Addr().Is4() && ps.IPv4 != nil && ps.IPv4.From == fsv1.AddressPool:
		ps.IPv4.From, ps.IPv4.Address, ps.IPv4.Pool = fsv1.AddressStatic, p.String(), nil
	case p.Addr().Is6() && ps.IPv6 != nil && ps.IPv6.From == fsv1.AddressPool:
		ps.IPv6.From, ps.IPv6.Address, ps.IPv6.Pool = fsv1.AddressStatic, p.String(), nil
	default:
		return false
	}
	return true
}
