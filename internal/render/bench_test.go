package render_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/manifest"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// BenchmarkRender renders every golden scenario's checked spec against its facts: what the
// supervisor does at each start after render.Prepare (BenchmarkPrepare) checked the spec once.
// Before the checked spec (issue 33) a render also applied the CRD's defaults and bounds
// (internal/crdwalk over the spec as JSON), about half of its time.
func BenchmarkRender(b *testing.B) {
	scenarios, _ := filepath.Glob(filepath.Join(goldenDir, "*.facts.yaml"))
	for _, sc := range scenarios {
		facts, stack := loadScenario(b, sc)
		sis, err := manifest.StackInstances(stack)
		if err != nil {
			b.Fatal(err)
		}
		spec := render.MustPrepare(b, &sis[0].Spec)
		b.Run(strings.TrimSuffix(filepath.Base(sc), ".facts.yaml"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := render.Render(spec, facts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPrepare defaults and checks every golden scenario's spec: once per path (the
// webhook's validation, a supervisor's start, inject.Prepare).
func BenchmarkPrepare(b *testing.B) {
	scenarios, _ := filepath.Glob(filepath.Join(goldenDir, "*.facts.yaml"))
	for _, sc := range scenarios {
		_, stack := loadScenario(b, sc)
		sis, err := manifest.StackInstances(stack)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.TrimSuffix(filepath.Base(sc), ".facts.yaml"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, errs := render.Prepare(&sis[0].Spec); len(errs) > 0 {
					b.Fatal(errs.ToAggregate())
				}
			}
		})
	}
}
