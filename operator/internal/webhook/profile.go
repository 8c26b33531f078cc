package webhook

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// profileWarnings tells kubectl apply about a profile value that cannot apply to the spec (Proxy's
// [rss_check] table without upstreams): valid, but likely not what the user meant.
func profileWarnings(values []render.ProfileValue) admission.Warnings {
	var out admission.Warnings
	for _, v := range values {
		if v.Unused != "" {
			out = append(out, fmt.Sprintf("spec.profile: %s leaves [%s] %s unset: %s", v.Profile, v.Section, v.Key, v.Unused))
		}
	}
	return out
}
