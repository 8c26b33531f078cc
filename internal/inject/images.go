package inject

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ImageAllowed says whether image may run as the dataplane: the configured default always, any
// image when no allow-list is configured, otherwise one an entry admits. References are
// compared as the runtime resolves them (imageref.go): the registry host exactly, port
// included, then the repository path at a '/' boundary ("registry.example/kube-fstack" admits
// "registry.example/kube-fstack/dataplane:v1" but not "registry.example/kube-fstack-evil/x",
// "registry.example:31337/kube-fstack/x" or "registry.example.evil/kube-fstack/x"). An image
// that does not parse is refused; so is every image under an entry that does not.
func (c Config) ImageAllowed(image string) bool {
	if image == "" || image == c.Image || len(c.AllowedImages) == 0 {
		return true
	}
	ref, ok := parseImageRef(image)
	if !ok {
		return false
	}
	if def, ok := parseImageRef(c.Image); ok && def == ref {
		return true
	}
	for _, entry := range c.AllowedImages {
		if p, ok := parseImagePattern(entry); ok && p.admits(ref) {
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
	shown := image
	if len(shown) > 256 { // a hostile reference must not fill the message
		shown = fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(shown[:256], ""), len(image))
	}
	return field.Invalid(path, shown, fmt.Sprintf(
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

// CheckImagePrefixes refuses an allow-list entry that names no registry host or no valid
// repository path, so that a mistyped --allowed-dataplane-images stops the operator instead of
// refusing every image.
func CheckImagePrefixes(entries []string) error {
	for _, e := range entries {
		if _, ok := parseImagePattern(e); !ok {
			return fmt.Errorf("--allowed-dataplane-images: %q is not a registry host followed by an optional repository path "+
				"(e.g. registry.example/kube-fstack/, registry.example:5000, docker.io/library/nginx)", e)
		}
	}
	return nil
}
