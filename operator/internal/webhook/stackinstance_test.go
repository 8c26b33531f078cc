package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// stackInstanceWebhook is the StackInstance validator as controller-runtime serves it: the
// request decoded, then validated (render.Prepare defaults and checks the spec once).
func stackInstanceWebhook() *admission.Webhook {
	scheme := runtime.NewScheme()
	_ = fsv1.AddToScheme(scheme)
	return admission.WithValidator[*fsv1.StackInstance](scheme, &StackInstanceValidator{Images: inject.DefaultConfig()})
}

func stackInstanceRequest(t testing.TB, si *fsv1.StackInstance) admission.Request {
	t.Helper()
	si.APIVersion, si.Kind = fsv1.GroupVersion.String(), "StackInstance"
	raw, err := json.Marshal(si)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "web", Name: si.Name, Object: runtime.RawExtension{Raw: raw},
	}}
}

// The validator admits a sample stack and refuses a broken one naming the field and the fix.
func TestStackInstanceAdmission(t *testing.T) {
	wh := stackInstanceWebhook()
	ctx := context.Background()
	if resp := wh.Handle(ctx, stackInstanceRequest(t, fixtures.Stack(t, "vhost-user"))); !resp.Allowed {
		t.Fatalf("the sample is refused: %v", resp.Result)
	}
	bad := fixtures.Stack(t, "vhost-user")
	bad.Spec.Ports[0].Processes = []int32{bad.Spec.Processes}
	resp := wh.Handle(ctx, stackInstanceRequest(t, bad))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "spec.ports[0].processes[0]") ||
		!strings.Contains(resp.Result.Message, "may only name process indices below it") {
		t.Fatalf("want a refusal at spec.ports[0].processes[0] saying what to do, got %v", resp.Result)
	}
}

// BenchmarkStackInstanceAdmission is one StackInstance admission request: decoding, defaulting and
// every check of the renderer and the operator (hack/bench-render.sh compares it across revisions).
func BenchmarkStackInstanceAdmission(b *testing.B) {
	wh := stackInstanceWebhook()
	req := stackInstanceRequest(b, fixtures.Stack(b, "vhost-user"))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := wh.Handle(ctx, req); !resp.Allowed {
			b.Fatal(resp.Result)
		}
	}
}
