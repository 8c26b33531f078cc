package webhook

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
)

func TestPodSecurityHint(t *testing.T) {
	baseline := api.LevelVersion{Level: api.LevelBaseline, Version: api.LatestVersion()}
	restricted := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	plain := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	withCaps := func(caps ...corev1.Capability) *corev1.Pod {
		p := plain.DeepCopy()
		// The dataplane is a native sidecar: an init container.
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "fstack-dataplane",
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}})
		return p
	}
	hostNet := plain.DeepCopy()
	hostNet.Spec.HostNetwork = true
	for _, tc := range []struct {
		name          string
		original, pod *corev1.Pod
		lv            api.LevelVersion
		want, wantNot string
	}{
		{"PCI", plain, withCaps("IPC_LOCK"), baseline, "IPC_LOCK for its PCI ports", "NET_ADMIN"},
		{"PCI and KNI", plain, withCaps("IPC_LOCK", "NET_ADMIN"), baseline, "IPC_LOCK for its PCI ports (VFIO pins the mempools) and NET_ADMIN for KNI", ""},
		{"restricted", plain, withCaps(), restricted, "runs as root", "privileged"},
		{"the pod's own fields", hostNet, hostNet, baseline, "pod as written already breaks it", "injector adds"},
		{"the injection", plain, withCaps(), baseline, "What the injector adds for this stack needs more than \"baseline\"", "as written"},
	} {
		got := podSecurityHint(tc.original, tc.pod, tc.lv)
		if !strings.Contains(got, tc.want) || (tc.wantNot != "" && strings.Contains(got, tc.wantNot)) {
			t.Errorf("%s: %q, want it to say %q and not %q", tc.name, got, tc.want, tc.wantNot)
		}
	}
}
