package render_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// Each path applies the CRD's defaults (a JSON round trip through internal/crdwalk) once, in
// render.Prepare; what takes the checked spec never again. Before issue 33 the StackInstance
// webhook's validation did it 4 times, a supervisor's start 3 times, inject.Prepare (and with it
// the node requirements) twice.
func TestOneDefaultingPerPath(t *testing.T) {
	stack := fixtures.Stack(t, "vhost-user")
	count := func(path string, f func()) {
		t.Helper()
		before := render.Defaultings()
		f()
		if n := render.Defaultings() - before; n != 1 {
			t.Errorf("%s: the spec was defaulted %d times, want once", path, n)
		}
	}
	prepare := func(s *fsv1.StackInstanceSpec) *render.Spec { return render.MustPrepare(t, s) }
	count("StackInstance validation", func() {
		// The webhook's: Prepare, then the snapshot's size and the profile's warnings.
		checked := prepare(&stack.Spec)
		if err := inject.CheckSnapshotSize(nil, checked); err != nil {
			t.Fatal(err)
		}
		_ = checked.Profile()
	})
	count("inject.Prepare", func() {
		prep, err := inject.Prepare(stack, inject.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		_ = prep.NodeRequirements()
	})
	// The pod's snapshot is the checked spec's defaulted form; the supervisor prepares it, reads
	// its facts from it and renders it.
	snapshot := prepare(&stack.Spec).Defaulted().DeepCopy()
	count("supervisor start", func() {
		checked := prepare(snapshot)
		facts := render.PlaceholderFacts(checked)
		if _, err := render.Render(checked, facts); err != nil {
			t.Fatal(err)
		}
	})
	count("node requirements", func() { _ = prepare(&stack.Spec).NodeRequirements() })
}

// A checked spec is shared (the webhook keeps one per StackInstance generation for every pod it
// injects): rendering it never changes it.
func TestRenderLeavesTheCheckedSpecAlone(t *testing.T) {
	for name, si := range fixtures.Stacks(t) {
		checked, errs := render.Prepare(&si.Spec)
		if len(errs) > 0 {
			continue
		}
		before := checked.Defaulted().DeepCopy()
		if _, err := render.Render(checked, render.PlaceholderFacts(checked)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = checked.NodeRequirements()
		if !equality.Semantic.DeepEqual(before, checked.Defaulted()) {
			t.Errorf("%s: rendering changed the checked spec", name)
		}
	}
}
