package inject

import (
	"errors"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/fixtures"
)

func TestImageAllowed(t *testing.T) {
	cfg := testConfig()
	cfg.AllowedImages = ParseImagePrefixes(" registry.example/kube-fstack/ ,, other.example/fstack")
	for image, want := range map[string]bool{
		"":                                  true, // the default
		cfg.Image:                           true,
		"registry.example/kube-fstack/dp:1": true,
		"other.example/fstack/dataplane:1":  true,
		"other.example/fstack:v1":           true,
		"other.example/fstack@sha256:00":    true,
		"other.example/fstack-evil/x:1":     false, // a prefix ends at a component boundary
		"other.example/fstackx":             false,
		"registry.example/kube-fstack":      false,
		"evil.example/kube-fstack/dp:1":     false,
		"localhost/kube-fstack/other:dev":   false, // only the default itself, not its neighbours
	} {
		if got := cfg.ImageAllowed(image); got != want {
			t.Errorf("ImageAllowed(%q) = %v, want %v", image, got, want)
		}
	}
	if open := testConfig(); !open.ImageAllowed("anything.example/x:1") {
		t.Error("no prefixes configured must allow any image")
	}
}

// A StackInstance admitted before the operator restricted its images cannot inject pods.
func TestPrepareRefusesDisallowedImage(t *testing.T) {
	cfg := testConfig()
	cfg.AllowedImages = []string{"registry.example/kube-fstack/"}
	stack := fixtures.Stacks(t)["two-apps"] // spec.dataplane.image: registry.example/fstack/dataplane:v1.25
	_, err := Prepare(stack, cfg)
	var re *RejectError
	if !errors.As(err, &re) {
		t.Fatalf("want a *RejectError, got %v", err)
	}
	for _, want := range []string{"metadata.labels[kubefstack.io/stack]", "spec.dataplane.image", "registry.example/fstack/dataplane:v1.25", "registry.example/kube-fstack/"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err.Error(), want)
		}
	}
	cfg.AllowedImages = []string{"registry.example/fstack/"}
	if _, err := Prepare(stack, cfg); err != nil {
		t.Fatalf("an allowed image was refused: %v", err)
	}
}
