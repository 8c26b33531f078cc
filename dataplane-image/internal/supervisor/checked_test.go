package supervisor

import (
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// defaulted is a spec the test knows valid with every default applied (render.Prepare's).
func defaulted(t testing.TB, s *fsv1.StackInstanceSpec) *fsv1.StackInstanceSpec {
	t.Helper()
	c, errs := render.Prepare(s)
	if len(errs) > 0 {
		t.Fatalf("render.Prepare: %v", errs.ToAggregate())
	}
	return c.Defaulted()
}
