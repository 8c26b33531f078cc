package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// When the pods cannot be listed, Reconcile still patches the status: the Ready condition turns
// Unknown with PodListFailed and the error, the counts stay as last observed, and the ConfigMap
// condition reports the write made before the failure. The operator lists pods from its cache,
// which a real API server cannot be made to fail, so this one test uses controller-runtime's fake
// client with an interceptor; the ConfigMap write failure is proven against kube-apiserver in
// operator/test/envtest.
func TestReconcilePatchesStatusWhenPodListFails(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = fsv1.AddToScheme(s)
	si := &fsv1.StackInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "s", Generation: 2},
		Spec: fsv1.StackInstanceSpec{FStackVersion: fsv1.FStackV125, Processes: 1,
			Ports: []fsv1.PortSpec{{Name: "data", Device: fsv1.PortDevice{VhostUser: &fsv1.VhostUserDevice{}},
				Addressing: fsv1.Addressing{IPv4: &fsv1.IPv4Address{Address: "10.0.0.2/24", Gateway: "10.0.0.1"}}}}},
		Status: fsv1.StackInstanceStatus{BoundPods: 3, ReadyPods: 2},
	}
	listErr := errors.New("the cache is gone")
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(si).WithStatusSubresource(si).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			if _, ok := l.(*corev1.PodList); ok {
				return listErr
			}
			return c.List(ctx, l, o...)
		}}).Build()
	r := &StackInstanceReconciler{Client: c, APIReader: c}
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(si)})
	if !errors.Is(err, listErr) {
		t.Fatalf("Reconcile returned %v, want the list error (so it is retried)", err)
	}
	got := &fsv1.StackInstance{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(si), got); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionUnknown || ready.Reason != fsv1.ReasonPodListFailed ||
		!strings.Contains(ready.Message, "listing the pods labelled kubefstack.io/stack=s failed") ||
		!strings.Contains(ready.Message, listErr.Error()) {
		t.Fatalf("Ready condition %+v", ready)
	}
	if cm := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionConfigMap); cm == nil || cm.Status != metav1.ConditionTrue {
		t.Fatalf("ConfigMap condition %+v, Valid %+v", cm, meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionValid))
	}
	if got.Status.BoundPods != 3 || got.Status.ReadyPods != 2 || got.Status.Ready != "2/3" || got.Status.ObservedGeneration != 2 {
		t.Fatalf("status %+v: the counts must stay as last observed", got.Status)
	}
}
