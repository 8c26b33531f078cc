package chart

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/test/golden"
)

// TestGolden renders every value set and compares it with testdata/golden/<set>.yaml
// (UPDATE_GOLDEN=1, or make generate, rewrites them); a golden without a value set fails.
func TestGolden(t *testing.T) {
	sets := valueSets(t)
	for _, set := range sets {
		t.Run(set, func(t *testing.T) {
			golden.Compare(t, filepath.Join("testdata", "golden", set+".yaml"), []byte(render(t, set)))
		})
	}
	goldens, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.yaml"))
	for _, g := range goldens {
		if !contains(sets, strings.TrimSuffix(filepath.Base(g), ".yaml")) {
			golden.MustNotExist(t, g)
		}
	}
}

// TestLint runs helm lint --strict with every value set.
func TestLint(t *testing.T) {
	for _, set := range valueSets(t) {
		t.Run(set, func(t *testing.T) {
			out, stderr, err := helm(t, "lint", "--strict", chartDir, "--namespace", namespace,
				"-f", filepath.Join("testdata", "values", set+".yaml"))
			if err != nil {
				t.Fatalf("helm lint --strict: %v\n%s%s", err, out, stderr)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint --strict did not pass:\n%s", out)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
