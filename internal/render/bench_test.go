package render_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/manifest"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// BenchmarkRender renders every golden scenario, the CRD's defaults and bounds included
// (internal/crdwalk over the spec as JSON: since issue 20 about half of the time).
func BenchmarkRender(b *testing.B) {
	scenarios, _ := filepath.Glob(filepath.Join(goldenDir, "*.facts.yaml"))
	for _, sc := range scenarios {
		facts, stack := loadScenario(b, sc)
		sis, err := manifest.StackInstances(stack)
		if err != nil {
			b.Fatal(err)
		}
		spec := &sis[0].Spec
		b.Run(strings.TrimSuffix(filepath.Base(sc), ".facts.yaml"), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := render.RenderRaw(spec, facts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
