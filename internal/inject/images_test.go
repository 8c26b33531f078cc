package inject

import (
	"errors"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

func TestImageAllowed(t *testing.T) {
	cfg := testConfig()
	cfg.AllowedImages = ParseImagePrefixes(" registry.example/kube-fstack/ ,, other.example/fstack")
	for image, want := range map[string]bool{
		"":                                      true, // the default
		cfg.Image:                               true,
		"registry.example/kube-fstack/dp:1":     true,
		"other.example/fstack/dataplane:1":      true,
		"other.example/fstack:v1":               true,
		"other.example/fstack@sha256:" + digest: true,
		"other.example/fstack-evil/x:1":         false, // a prefix ends at a component boundary
		"other.example/fstackx":                 false,
		"registry.example/kube-fstack":          false,
		"evil.example/kube-fstack/dp:1":         false,
		"localhost/kube-fstack/other:dev":       false, // only the default itself, not its neighbours
	} {
		if got := cfg.ImageAllowed(image); got != want {
			t.Errorf("ImageAllowed(%q) = %v, want %v", image, got, want)
		}
	}
	if open := testConfig(); !open.ImageAllowed("anything.example/x:1") {
		t.Error("no prefixes configured must allow any image")
	}
}

// digest is a well-formed sha256 digest.
var digest = strings.Repeat("0123456789abcdef", 4)

// Issue 23: the allow-list compares references as the runtime resolves them: the registry host
// exactly (its port included), then the repository path at a '/'. An image with no registry is
// on Docker Hub, a one-component one under library/.
func TestImageAllowedOnReferenceBoundaries(t *testing.T) {
	cases := map[string]map[string]bool{
		"registry.example": {
			"registry.example/fstack/dp:v1":               true,
			"registry.example/dp":                         true,
			"registry.example/fstack/dp@sha256:" + digest: true,
			"registry.example:31337/fstack/dp:v1":         false, // another port is another registry
			"registry.example.evil/fstack/dp:v1":          false,
			"registry.examplex/dp":                        false,
			"evil.example/registry.example/dp":            false,
			"registry.example":                            false, // Docker Hub's library/registry.example
		},
		"registry.example:5000/fstack/": {
			"registry.example:5000/fstack/dp:v1":                  true,
			"registry.example:5000/fstack/dp:v1@sha256:" + digest: true,
			"registry.example/fstack/dp:v1":                       false,
			"registry.example:50001/fstack/dp:v1":                 false,
			"registry.example:5000/fstack:v1":                     false, // not under fstack/
			"registry.example:5000/fstack-evil/dp":                false,
			"registry.example:5000/fstack/../evil/dp":             false, // not a reference
			"registry.example:5000/fstack/dp@sha256:00":           false, // not a digest
		},
		"registry.example/fstack/dp:v1": {
			"registry.example/fstack/dp:v1":   true,
			"registry.example/fstack/dp:v2":   false,
			"registry.example/fstack/dp":      false,
			"registry.example/fstack/dp:v1.1": false,
			"registry.example/fstack/dp/x:v1": false,
			"registry.example/fstack/dpx:v1":  false,
		},
		"docker.io/library/": {
			"nginx":                          true,
			"nginx:1.27":                     true,
			"library/nginx@sha256:" + digest: true,
			"docker.io/library/nginx":        true,
			"index.docker.io/library/nginx":  true,
			"fstack/dp":                      false, // docker.io/fstack/dp
			"localhost/nginx":                false,
		},
		"docker.io/fstack/": {
			"fstack/dp:v1":        true,
			"docker.io/fstack/dp": true,
			"fstack":              false, // docker.io/library/fstack
			"Fstack/dp":           false, // an upper-case first component is a registry host
			"fstack.example/dp":   false,
		},
	}
	for entry, images := range cases {
		if err := CheckImagePrefixes([]string{entry}); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig()
		cfg.AllowedImages = []string{entry}
		for image, want := range images {
			if got := cfg.ImageAllowed(image); got != want {
				t.Errorf("allow-list %q: ImageAllowed(%q) = %v, want %v", entry, image, got, want)
			}
		}
	}
	for _, bad := range []string{"", "/fstack/", "registry.example/Fstack/", "registry..example", "registry.example/fstack/dp:v1:v2"} {
		if err := CheckImagePrefixes([]string{bad}); err == nil || !strings.Contains(err.Error(), "--allowed-dataplane-images") {
			t.Errorf("allow-list entry %q: want an error naming the flag, got %v", bad, err)
		}
	}
}

func TestImageErrorsDoNotEchoHugeImages(t *testing.T) {
	cfg := testConfig()
	cfg.AllowedImages = []string{"registry.example/"}
	ferr := cfg.CheckImage(nil, "evil.example/"+strings.Repeat("x", 1<<20))
	if ferr == nil || len(ferr.Error()) > 2000 {
		t.Fatalf("want a short refusal, got one of %d bytes", len(ferr.Error()))
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
