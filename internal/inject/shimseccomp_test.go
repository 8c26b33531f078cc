package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The shim's DPDK secondary needs the memory-policy calls: an app container that would run
// under the runtime's default profile gets the dataplane's Localhost profile instead; the
// user's own Unconfined or Localhost choice stays.
func TestShimContainersGetTheDataplanesProfile(t *testing.T) {
	sp := func(typ corev1.SeccompProfileType, name string) *corev1.SeccompProfile {
		p := &corev1.SeccompProfile{Type: typ}
		if name != "" {
			p.LocalhostProfile = &name
		}
		return p
	}
	for _, tc := range []struct {
		name            string
		container, pod  *corev1.SeccompProfile
		wantType        corev1.SeccompProfileType
		wantLocalhostOf string
	}{
		{"unset", nil, nil, corev1.SeccompProfileTypeLocalhost, podcontract.SeccompLocalhostProfile},
		{"RuntimeDefault on the container", sp(corev1.SeccompProfileTypeRuntimeDefault, ""), nil, corev1.SeccompProfileTypeLocalhost, podcontract.SeccompLocalhostProfile},
		{"RuntimeDefault on the pod", nil, sp(corev1.SeccompProfileTypeRuntimeDefault, ""), corev1.SeccompProfileTypeLocalhost, podcontract.SeccompLocalhostProfile},
		{"Unconfined on the container", sp(corev1.SeccompProfileTypeUnconfined, ""), nil, corev1.SeccompProfileTypeUnconfined, ""},
		{"Unconfined on the pod", nil, sp(corev1.SeccompProfileTypeUnconfined, ""), "", ""},
		{"the user's Localhost", sp(corev1.SeccompProfileTypeLocalhost, "mine.json"), nil, corev1.SeccompProfileTypeLocalhost, "mine.json"},
	} {
		c := &corev1.Container{Name: "app"}
		if tc.container != nil {
			c.SecurityContext = &corev1.SecurityContext{SeccompProfile: tc.container}
		}
		var pod *corev1.PodSecurityContext
		if tc.pod != nil {
			pod = &corev1.PodSecurityContext{SeccompProfile: tc.pod}
		}
		shimSeccomp(c, pod)
		var got *corev1.SeccompProfile
		if c.SecurityContext != nil {
			got = c.SecurityContext.SeccompProfile
		}
		switch {
		case tc.wantType == "" && got != nil:
			t.Errorf("%s: the container got %+v, want the pod's own profile to apply", tc.name, got)
		case tc.wantType != "" && (got == nil || got.Type != tc.wantType):
			t.Errorf("%s: profile %+v, want %s", tc.name, got, tc.wantType)
		case tc.wantLocalhostOf != "" && (got.LocalhostProfile == nil || *got.LocalhostProfile != tc.wantLocalhostOf):
			t.Errorf("%s: localhost profile %v, want %s", tc.name, got.LocalhostProfile, tc.wantLocalhostOf)
		}
	}
}
