package envtest

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

// Updates of an injected pod cannot undo admission: a dataplane image outside the allowed ones
// (kubectl set image) and removing the stack label (which every kube-fstack webhook selects by)
// and changing the spec snapshot or its version are refused with the field path; an allowed
// image and unrelated changes pass.
func TestInjectedPodUpdatesRefused(t *testing.T) {
	ctx := context.Background()
	testenv.CreateIfAbsent(t, k8s, stack(t, "vhost-user", "vhost-user"))
	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Name = "updated"
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.DeleteAtEnd(t, k8s, pod)
	wantErr(t, updatePod(ctx, pod.Name, func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "evil.example/fstack/dataplane:v1" }),
		"spec.initContainers[0].image: Invalid value", "--allowed-dataplane-images")
	wantErr(t, updatePod(ctx, pod.Name, func(p *corev1.Pod) { delete(p.Labels, fsv1.StackLabel) }),
		"metadata.labels[kubefstack.io/stack]: Forbidden")
	// The spec snapshot and its version reach the webhook (the matchConditions select them) and
	// stay as admission wrote them.
	wantErr(t, updatePod(ctx, pod.Name, func(p *corev1.Pod) { p.Annotations[podcontract.SpecAnnotation] = `{"processes":8}` }),
		"metadata.annotations[kubefstack.io/spec]: Forbidden")
	wantErr(t, updatePod(ctx, pod.Name, func(p *corev1.Pod) { p.Annotations[podcontract.SpecVersionAnnotation] = "kubefstack.io/v9" }),
		"metadata.annotations[kubefstack.io/spec-version]: Forbidden")
	wantErr(t, updatePod(ctx, pod.Name, func(p *corev1.Pod) { delete(p.Annotations, podcontract.SpecVersionAnnotation) }),
		"metadata.annotations[kubefstack.io/spec-version]: Forbidden")
	if err := updatePod(ctx, pod.Name, func(p *corev1.Pod) { p.Annotations["team"] = "web" }); err != nil {
		t.Fatalf("an unrelated annotation was refused: %v", err)
	}
	if err := updatePod(ctx, pod.Name, func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = allowedImages + "dataplane:v1.25" }); err != nil {
		t.Fatalf("an allowed dataplane image was refused: %v", err)
	}
	if err := updatePod(ctx, pod.Name, func(p *corev1.Pod) { p.Labels["team"] = "web" }); err != nil {
		t.Fatalf("an unrelated update was refused: %v", err)
	}
	optOut := fixtures.LoadPod(t, "opt-out")
	optOut.Name = "opted-out-updated"
	if err := k8s.Create(ctx, optOut); err != nil {
		t.Fatal(err)
	}
	if err := updatePod(ctx, optOut.Name, func(p *corev1.Pod) { delete(p.Labels, fsv1.StackLabel) }); err != nil {
		t.Fatalf("a pod that was never injected may lose its label: %v", err)
	}
}

// updatePod applies change to the stored pod, retrying on conflicts.
func updatePod(ctx context.Context, name string, change func(*corev1.Pod)) error {
	for {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: name}, p); err != nil {
			return err
		}
		change(p)
		if err := k8s.Update(ctx, p); !apierrors.IsConflict(err) {
			return err
		}
	}
}

// A program linked with libfstack (spec.program) runs its dataplane as a regular container, not
// an init container: `kubectl set image` on it must reach the update webhook too (the
// matchConditions select a changed dataplane image in either list) and meet the same allow-list.
func TestProgramDataplaneImageUpdateRefused(t *testing.T) {
	ctx := context.Background()
	testenv.CreateIfAbsent(t, k8s, stack(t, "native", "native"))
	pod := fixtures.LoadPod(t, "native-helloworld")
	pod.Name = "program-updated"
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	idx := -1
	for i, c := range pod.Spec.Containers {
		if c.Name == podcontract.DataplaneContainer {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("the injected program pod has no regular %s container: %+v", podcontract.DataplaneContainer, pod.Spec.Containers)
	}
	wantErr(t, updatePod(ctx, pod.Name, func(p *corev1.Pod) { p.Spec.Containers[idx].Image = "evil.example/fstack/dataplane:v1" }),
		fmt.Sprintf("spec.containers[%d].image: Invalid value", idx), "--allowed-dataplane-images")
	if err := updatePod(ctx, pod.Name, func(p *corev1.Pod) { p.Spec.Containers[idx].Image = allowedImages + "dataplane:v1.25" }); err != nil {
		t.Fatalf("an allowed dataplane image was refused: %v", err)
	}
}
