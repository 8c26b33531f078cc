package envtest

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// stack is the sample or test StackInstance name (internal/test/fixtures), as a StackInstance named as
// in the opted-in namespace.
func stack(t *testing.T, name, as string) *fsv1.StackInstance {
	t.Helper()
	return fixtures.Stack(t, name, fixtures.InNamespace(optedInNS, as))
}

// injected is pod as the operator's webhook admits it for the StackInstance stack as stored (the
// API server's defaults applied), holding addrs (one per address the stack needs; none for a stack
// without a pool): the same call of internal/inject the webhook makes once it has claimed them.
func injected(t *testing.T, pod *corev1.Pod, stack string, addrs ...netip.Addr) *corev1.Pod {
	t.Helper()
	si := &fsv1.StackInstance{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: pod.Namespace, Name: stack}, si); err != nil {
		t.Fatal(err)
	}
	cfg := inject.DefaultConfig()
	cfg.ImagePullPolicy = corev1.PullIfNotPresent
	prep, err := inject.Prepare(si, cfg)
	if err != nil {
		t.Fatalf("prepare StackInstance %s: %v", stack, err)
	}
	var out *corev1.Pod
	var d inject.Decision
	if len(addrs) == 0 {
		out, d, err = prep.Inject(pod)
	} else {
		out, d, err = prep.InjectAddresses(pod, addrs)
	}
	if err != nil || d != inject.Injected {
		t.Fatalf("inject pod %s: %s %v", pod.Name, d, err)
	}
	return out
}

// writeStackStatus writes what the controller writes on the StackInstance namespace/name when
// bound pods are bound and ready of them ready, the current ones recording hash.
func writeStackStatus(t *testing.T, namespace, name, hash string, ready, bound int32) {
	t.Helper()
	si := &fsv1.StackInstance{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, si); err != nil {
		t.Fatal(err)
	}
	si.Status.ConfigHash, si.Status.ReadyPods, si.Status.BoundPods = hash, ready, bound
	si.Status.Ready = fmt.Sprintf("%d/%d", ready, bound)
	if err := k8s.Status().Update(context.Background(), si); err != nil {
		t.Fatalf("status of StackInstance %s: %v", name, err)
	}
}
