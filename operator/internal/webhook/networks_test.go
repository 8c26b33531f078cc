package webhook

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// A pod created without metadata.namespace (kubectl create -f in the current namespace) names
// its network's namespace explicitly: the injector must compare it with the request's
// namespace, where the pod is created, and the patch must leave metadata.namespace alone.
func TestHandleComparesNetworksInTheRequestsNamespace(t *testing.T) {
	h := newInjector(t)
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = fsv1.AddToScheme(scheme)
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace("web", "vhost-user"), func(si *fsv1.StackInstance) {
		si.Spec.Ports[0].Network = &fsv1.NetworkRef{Name: "fstack-net"}
	})
	h.Reader = fake.NewClientBuilder().WithScheme(scheme).WithObjects(si,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{fsv1.InjectionLabel: "enabled"}}}).Build()
	h.decoder = admission.NewDecoder(scheme)
	pod := podJSON(t, fixtures.WithNamespace(""), fixtures.WithAnnotation(podcontract.NetworksAnnotation, "web/fstack-net@net1"))
	resp := h.Handle(context.Background(), request("web", pod))
	if !resp.Allowed {
		t.Fatalf("refused: %+v", resp.Result)
	}
	for _, p := range resp.Patches {
		if strings.HasPrefix(p.Path, "/metadata/namespace") {
			t.Errorf("the patch sets the namespace: %+v", p)
		}
	}
}
