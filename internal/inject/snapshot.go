package inject

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// CheckSnapshotSize refuses a spec whose snapshot does not fit in a pod's annotations
// (podcontract.MaxSpecSnapshot), at path (the spec), saying how large it is and how much room it
// may take.
func CheckSnapshotSize(path *field.Path, spec *render.Spec) *field.Error {
	raw, err := snapshot.Encode(spec.Defaulted())
	return snapshotError(path, raw, err)
}

// snapshotError is the field error of snapshot.Encode's answer, or nil.
func snapshotError(path *field.Path, raw []byte, err error) *field.Error {
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, snapshot.ErrTooLarge):
		return field.InternalError(path, err)
	}
	return field.Forbidden(path, fmt.Sprintf(
		"every pod of this stack carries the spec (defaults applied, JSON) in its %s annotation: this one is %d bytes, over the %d bytes (%d KiB) kube-fstack allows it, "+
			"half of the API server's %d KiB limit on a pod's annotations (the other half is left for the injection's other annotations and the pod's own); "+
			"shorten the spec (fewer freebsd boot/sysctl entries, VIPs or VLANs)",
		podcontract.SpecAnnotation, len(raw), podcontract.MaxSpecSnapshot, podcontract.MaxSpecSnapshot>>10, podcontract.PodAnnotationLimit>>10))
}
