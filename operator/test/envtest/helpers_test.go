package envtest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// eventually retries check until it passes or timeout, then fails with its last error.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stack is the sample or test StackInstance name (internal/test/fixtures), as a StackInstance named as
// in the opted-in namespace.
func stack(t *testing.T, name, as string) *fsv1.StackInstance {
	t.Helper()
	return fixtures.Stack(t, name, fixtures.InNamespace(optedInNS, as))
}

// ensureStack creates si unless it exists.
func ensureStack(t *testing.T, si *fsv1.StackInstance) {
	t.Helper()
	if err := k8s.Create(context.Background(), si); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create StackInstance %s: %v", si.Name, err)
	}
}

// deleteAtEnd deletes pod when the test ends: a static address serves one pod, and the next
// test's pod of the same StackInstance needs it (its claim goes with the pod).
func deleteAtEnd(t *testing.T, pod client.Object) {
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete pod %s: %v", pod.GetName(), err)
		}
	})
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
	deleteAtEnd(t, pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, State: state,
		Ready: ready, RestartCount: restarts, Image: "x", ImageID: "x"}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}
