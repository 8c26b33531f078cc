package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Only ephemeral containers the update adds are judged, each mount of an injected volume with
// its field path; a harmless one passes.
func TestCheckNewEphemeralContainers(t *testing.T) {
	debug := func(name string, mounts ...string) corev1.EphemeralContainer {
		c := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox"}}
		for _, m := range mounts {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: m, MountPath: "/" + m})
		}
		return c
	}
	old := &corev1.Pod{Spec: corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{debug("before", "fstack-vhost")}}}
	pod := old.DeepCopy()
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers,
		debug("harmless", "data"), debug("reach", "data", "fstack-vhost", "fstack-dpdk-runtime"))
	pod.Spec.EphemeralContainers[2].VolumeDevices = []corev1.VolumeDevice{{Name: "fstack-hugepages", DevicePath: "/dev/x"}}
	errs := CheckNewEphemeralContainers(old, pod)
	want := []string{
		"spec.ephemeralContainers[2].volumeMounts[1].name",
		"spec.ephemeralContainers[2].volumeMounts[2].name",
		"spec.ephemeralContainers[2].volumeDevices[0].name",
	}
	if len(errs) != len(want) {
		t.Fatalf("got %v, want errors at %v", errs, want)
	}
	for i, e := range errs {
		if e.Field != want[i] {
			t.Errorf("error %d at %s, want %s", i, e.Field, want[i])
		}
	}
	if errs := CheckNewEphemeralContainers(old, old); len(errs) != 0 {
		t.Fatalf("an update adding nothing was refused: %v", errs)
	}
}
