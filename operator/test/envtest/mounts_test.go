package envtest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

// Pods whose containers mount a volume the injector owns are refused with the mount's field
// path: at creation by the injection webhook (an app container, an init container, a pod that
// claims to be injected already), and later,
// for ephemeral containers added through the pods/ephemeralcontainers subresource (which the
// injection webhook never sees), by the validating webhook of that subresource. A harmless
// ephemeral container is admitted, and pods outside opted-in namespaces are not judged.
func TestPodsMountingInjectedVolumesRefused(t *testing.T) {
	ctx := context.Background()
	testenv.CreateIfAbsent(t, k8s, stack(t, "vhost-user", "vhost-user"))
	testenv.CreateIfAbsent(t, k8s, stack(t, "nginx-shim", "nginx-shim"))
	for name, path := range map[string]string{
		"mounts-socket-root":   "spec.containers[0].volumeMounts[1].name",
		"mounts-injected-init": "spec.initContainers[0].volumeMounts[0].name",
		// Claims to be injected already (a forged status annotation), so it is not injected again.
		"forged-status": "spec.containers[0].volumeMounts[0].name",
	} {
		pod := fixtures.LoadPod(t, name)
		wantErr(t, k8s.Create(ctx, pod), path+": Forbidden", "remove this mount")
	}

	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Name = "debugged"
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.DeleteAtEnd(t, k8s, pod)
	reach := debugContainer("reach", corev1.VolumeMount{Name: "fstack-vhost", MountPath: "/all-pods"})
	wantErr(t, addEphemeral(ctx, pod, reach), "spec.ephemeralContainers[0].volumeMounts[0].name: Forbidden", "fstack-vhost")
	got := &corev1.Pod{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.EphemeralContainers) != 0 {
		t.Fatalf("the refused ephemeral container was stored: %+v", got.Spec.EphemeralContainers)
	}
	if err := addEphemeral(ctx, got, debugContainer("harmless")); err != nil {
		t.Fatalf("a harmless ephemeral container was refused: %v", err)
	}

	plain := fixtures.LoadPod(t, "nginx-vhost")
	plain.Name, plain.Namespace = "debugged-plain", plainNS
	plain.Spec.Volumes = []corev1.Volume{{Name: "fstack-vhost", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if err := k8s.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if err := addEphemeral(ctx, plain, reach); err != nil {
		t.Fatalf("namespace %s did not opt in, yet its ephemeral container was judged: %v", plainNS, err)
	}
}

func debugContainer(name string, mounts ...corev1.VolumeMount) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: "localhost/nginx:1.22", Command: []string{"sleep", "1"}, VolumeMounts: mounts,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}}
}

// addEphemeral adds c through the pods/ephemeralcontainers subresource, as kubectl debug does.
func addEphemeral(ctx context.Context, pod *corev1.Pod, c corev1.EphemeralContainer) error {
	p := pod.DeepCopy()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, c)
	return k8s.SubResource("ephemeralcontainers").Update(ctx, p)
}

// In an opted-in namespace the node's socket root (and the project's other host directories)
// cannot be mounted by another volume name, through /run, or from a directory above it; and a pod
// that opts out of injection with kubefstack.io/inject: "false" still may not declare or mount an
// injected volume (issue 23). An opted-out pod that does neither is admitted as it is.
func TestHostPathsAndOptedOutPodsRefused(t *testing.T) {
	ctx := context.Background()
	testenv.CreateIfAbsent(t, k8s, stack(t, "vhost-user", "vhost-user"))
	testenv.CreateIfAbsent(t, k8s, stack(t, "nginx-shim", "nginx-shim"))
	wantErr(t, k8s.Create(ctx, fixtures.LoadPod(t, "hostpath-socket-root")),
		`spec.volumes[0].hostPath.path: Forbidden: hostPath "/run/kube-fstack/vhost/" of volume "sockets"`,
		`spec.volumes[1].hostPath.path: Forbidden: hostPath "/" of volume "node"`)
	wantErr(t, k8s.Create(ctx, fixtures.LoadPod(t, "opt-out-mounts-vhost")),
		`spec.volumes[0].name: Forbidden: fstack-vhost is reserved`, "kubefstack.io/inject: \"false\"",
		"spec.containers[0].volumeMounts[0].name: Forbidden")

	harmless := fixtures.LoadPod(t, "opt-out")
	harmless.Name = "opted-out-harmless"
	if err := k8s.Create(ctx, harmless); err != nil {
		t.Fatalf("an opted-out pod without injected volumes was refused: %v", err)
	}
	got := &corev1.Pod{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: harmless.Namespace, Name: harmless.Name}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.InitContainers) != 0 {
		t.Errorf("the opted-out pod was injected: %+v", got.Spec.InitContainers)
	}
}
