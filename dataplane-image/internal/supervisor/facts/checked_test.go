package facts

import (
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// checked is render.Prepare of a spec the test knows valid.
func checked(t testing.TB, s *fsv1.StackInstanceSpec) *render.Spec {
	t.Helper()
	c, errs := render.Prepare(s)
	if len(errs) > 0 {
		t.Fatalf("render.Prepare: %v", errs.ToAggregate())
	}
	return c
}
