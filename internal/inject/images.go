package inject

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ImageAllowed says whether image may run as the dataplane: the configured default always, any
// image when no prefix is configured, otherwise one that starts with an allowed prefix at a
// boundary of the reference ("registry.example/kube-fstack" allows
// "registry.example/kube-fstack/dataplane:v1" but not "registry.example/kube-fstack-evil/x").
// References are compared as written: the allowed prefixes must spell registries out.
func (c Config) ImageAllowed(image string) bool {
	if image == "" || image == c.Image || len(c.AllowedImages) == 0 {
		return true
	}
	for _, p := range c.AllowedImages {
		if p == "" || !strings.HasPrefix(image, p) {
			continue
		}
		if len(image) == len(p) || strings.ContainsAny(p[len(p)-1:], "/:@") || strings.ContainsAny(image[len(p):len(p)+1], "/:@") {
			return true
		}
	}
	return false
}

// CheckImage refuses a StackInstance's spec.dataplane.image (at path) that the operator does
// not allow, saying which prefixes it allows.
func (c Config) CheckImage(path *field.Path, image string) *field.Error {
	if c.ImageAllowed(image) {
		return nil
	}
	return field.Invalid(path, image, fmt.Sprintf(
		"the operator runs only dataplane images under %s (--allowed-dataplane-images) or its default %s; use one of those, or leave spec.dataplane.image empty",
		strings.Join(c.AllowedImages, ", "), c.Image))
}

// ParseImagePrefixes reads the comma-separated --allowed-dataplane-images.
func ParseImagePrefixes(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
