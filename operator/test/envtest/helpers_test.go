package envtest

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

// stack is the sample or test StackInstance name (internal/test/fixtures), as a StackInstance named as
// in the opted-in namespace.
func stack(t *testing.T, name, as string) *fsv1.StackInstance {
	t.Helper()
	return fixtures.Stack(t, name, fixtures.InNamespace(optedInNS, as))
}

// wantErr fails unless err is an API error whose message has every part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the API server accepted it; want an error containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err.Error(), p)
		}
	}
}

// statusPod creates a pod bound to stack (injected by the webhook) and writes its node and its
// dataplane's status.
func statusPod(t *testing.T, name, stack, node string, state corev1.ContainerState, ready bool, restarts int32) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Name, pod.Labels[fsv1.StackLabel], pod.Spec.NodeName = name, stack, node
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.DeleteAtEnd(t, k8s, pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, State: state,
		Ready: ready, RestartCount: restarts, Image: "x", ImageID: "x"}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}
