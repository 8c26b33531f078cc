package facts

import (
	"encoding/json"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// BenchmarkSpecToConfig is the spec's share of a supervisor's start: the pod's snapshot decoded
// and checked (DecodeSpec), the facts' view of it (PlaceholderFacts stands in for Gather, which
// reads the defaulted spec as well) and the render (hack/bench-render.sh compares it across
// revisions; the source is the same at both).
func BenchmarkSpecToConfig(b *testing.B) {
	data, err := json.Marshal(fixtures.Stack(b, "vhost-user").Spec)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		spec, err := DecodeSpec(data)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := render.Render(spec, render.PlaceholderFacts(spec)); err != nil {
			b.Fatal(err)
		}
	}
}
