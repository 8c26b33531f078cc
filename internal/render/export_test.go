package render

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// CheckSchema is the first of Prepare's checks alone: the CRD's bounds and its CEL rules' twins.
func CheckSchema(raw *fsv1.StackInstanceSpec) field.ErrorList {
	_, errs := schemaDefaults(raw)
	return errs
}

// Validate is every problem Prepare finds in raw.
func Validate(raw *fsv1.StackInstanceSpec) field.ErrorList {
	_, errs := Prepare(raw)
	return errs
}

// RenderRaw prepares raw and renders it with f, as a path from a spec to a pod's config does.
func RenderRaw(raw *fsv1.StackInstanceSpec, f *Facts) (*Result, error) {
	s, errs := Prepare(raw)
	if len(errs) > 0 {
		return nil, &ValidationError{Errs: errs}
	}
	return Render(s, f)
}

// RenderDefaulted is RenderRaw that also returns the spec with every default applied, as the
// render saw it.
func RenderDefaulted(raw *fsv1.StackInstanceSpec, f *Facts) (*fsv1.StackInstanceSpec, *Result, error) {
	s, errs := Prepare(raw)
	if len(errs) > 0 {
		return nil, nil, &ValidationError{Errs: errs}
	}
	res, err := Render(s, f)
	return s.Defaulted(), res, err
}

// MustPrepare prepares a spec the test knows valid.
func MustPrepare(t interface{ Fatalf(string, ...any) }, raw *fsv1.StackInstanceSpec) *Spec {
	s, errs := Prepare(raw)
	if len(errs) > 0 {
		t.Fatalf("Prepare: %v", errs.ToAggregate())
	}
	return s
}

// Defaultings is how many times the CRD's defaults were applied (a JSON round trip each).
func Defaultings() int64 { return defaultings.Load() }

// PoolParses is how many times a pool was parsed.
func PoolParses() int64 { return poolParses.Load() }

// ParsePool is the pool parser Prepare's render runs.
var ParsePool = parsePool
