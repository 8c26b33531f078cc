package inject

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// Every injected pod carries its StackInstance's spec (defaults applied, JSON) in the
// kubefstack.io/spec annotation, and the API server refuses a pod whose annotations (names and
// values) exceed 256 KiB in total. A spec whose snapshot takes most of that would be admitted
// and then make every pod that names it fail at creation, so admission keeps it to half: the
// other half is left for the status, config-hash and app-probe annotations the injection adds
// (a few KiB) and for the pod's own annotations.
const (
	// PodAnnotationLimit is the API server's limit on a pod's annotations, names and values.
	PodAnnotationLimit = 256 << 10
	// MaxSpecSnapshot is the largest spec snapshot an injected pod may carry.
	MaxSpecSnapshot = PodAnnotationLimit / 2
)

// SpecSnapshot is the kubefstack.io/spec annotation's value for spec.
func SpecSnapshot(spec *render.Spec) ([]byte, error) {
	return json.Marshal(spec.Defaulted())
}

// CheckSnapshotSize refuses a spec whose snapshot does not fit in a pod's annotations, at path
// (the spec), saying how large it is and how much room it may take.
func CheckSnapshotSize(path *field.Path, spec *render.Spec) *field.Error {
	raw, err := SpecSnapshot(spec)
	if err != nil {
		return field.InternalError(path, err)
	}
	return snapshotSizeError(path, len(raw))
}

func snapshotSizeError(path *field.Path, n int) *field.Error {
	if n <= MaxSpecSnapshot {
		return nil
	}
	return field.Forbidden(path, fmt.Sprintf(
		"every pod of this stack carries the spec (defaults applied, JSON) in its %s annotation: this one is %d bytes, over the %d bytes (%d KiB) kube-fstack allows it, "+
			"half of the API server's %d KiB limit on a pod's annotations (the other half is left for the injection's other annotations and the pod's own); "+
			"shorten the spec (fewer freebsd boot/sysctl entries, VIPs or VLANs)",
		podcontract.SpecAnnotation, n, MaxSpecSnapshot, MaxSpecSnapshot>>10, PodAnnotationLimit>>10))
}
