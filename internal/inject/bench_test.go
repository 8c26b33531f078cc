package inject

import (
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// BenchmarkPrepare is what the webhook does once per StackInstance generation (and `kubectl
// fstack inject` once per run): check, default and render the stack, and prepare what its pods get.
func BenchmarkPrepare(b *testing.B) {
	stack := fixtures.Stack(b, "vhost-user")
	cfg := testConfig()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Prepare(stack, cfg); err != nil {
			b.Fatal(err)
		}
	}
}
