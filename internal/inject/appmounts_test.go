package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// Every app container runs the launcher and preloads the shim from the shim volume: one that
// could write it could replace either for its siblings. With two shim containers, each mounts
// the shim volume read-only and, of the app-state volume, only its own directory; the dataplane
// alone writes the shim volume and sees every app's directory.
func TestAppContainersCannotWriteTheShimVolume(t *testing.T) {
	stacks := fixtures.Stacks(t)
	pod := fixtures.LoadPod(t, "nginx-vhost")
	sibling := *pod.Spec.Containers[0].DeepCopy()
	sibling.Name = "sibling"
	sibling.Ports = nil
	pod.Spec.Containers = append(pod.Spec.Containers, sibling)
	out, _, err := Inject(pod, stacks[StackName(pod)], testConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range out.Spec.Containers {
		shim, state := mountOf(c.VolumeMounts, podcontract.ShimVolume), mountOf(c.VolumeMounts, podcontract.AppStateVolume)
		switch {
		case shim == nil || state == nil:
			t.Errorf("%s: shim mount %+v, app-state mount %+v; want both", c.Name, shim, state)
		case !shim.ReadOnly:
			t.Errorf("%s mounts %s read-write: it could replace the launcher or the shim of its siblings", c.Name, podcontract.ShimVolume)
		case state.SubPath != c.Name || state.SubPathExpr != "" || state.ReadOnly || state.MountPath != podcontract.AppStateDir:
			t.Errorf("%s mounts %s as %+v; want only its own directory %q, writable, at %s", c.Name, podcontract.AppStateVolume, *state, c.Name, podcontract.AppStateDir)
		}
	}
	var dp *corev1.Container
	for i := range out.Spec.InitContainers {
		if out.Spec.InitContainers[i].Name == podcontract.DataplaneContainer {
			dp = &out.Spec.InitContainers[i]
		}
	}
	if dp == nil {
		t.Fatal("no dataplane container")
	}
	if m := mountOf(dp.VolumeMounts, podcontract.ShimVolume); m == nil || m.ReadOnly {
		t.Errorf("the dataplane's shim mount %+v; it fills the volume", m)
	}
	if m := mountOf(dp.VolumeMounts, podcontract.AppStateVolume); m == nil || m.SubPath != "" || m.MountPath != podcontract.AppStateDir {
		t.Errorf("the dataplane's app-state mount %+v; want the whole volume at %s", m, podcontract.AppStateDir)
	}
}

// A pod may not mount the app-state volume itself (it is reserved like every injected volume),
// nor put a volume of its own where the launcher writes.
func TestAppStateVolumeIsReserved(t *testing.T) {
	stacks := fixtures.Stacks(t)
	for name, mount := range map[string]corev1.VolumeMount{
		"by name": {Name: podcontract.AppStateVolume, MountPath: "/x"},
		"by path": {Name: "data", MountPath: podcontract.AppStateDir},
	} {
		pod := fixtures.LoadPod(t, "nginx-vhost")
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, mount)
		if _, _, err := Inject(pod, stacks[StackName(pod)], testConfig()); err == nil {
			t.Errorf("%s: a pod mounting the app-state volume itself was injected", name)
		}
	}
}

func mountOf(mounts []corev1.VolumeMount, volume string) *corev1.VolumeMount {
	for i := range mounts {
		if mounts[i].Name == volume {
			return &mounts[i]
		}
	}
	return nil
}
