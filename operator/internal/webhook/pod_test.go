package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
)

// The adapter's own decisions; the API-server path is covered by operator/test/envtest. The
// StackInstance is read from controller-runtime's fake client here, standing in for the cache.
func newInjector(t testing.TB) *PodInjector {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = fsv1.AddToScheme(scheme)
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace("web", "vhost-user"))
	// "quiet" has a StackInstance too, but has not opted in.
	quiet := fixtures.Stack(t, "vhost-user", fixtures.InNamespace("quiet", "vhost-user"))
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(si, quiet,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{fsv1.InjectionLabel: "enabled"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{fsv1.InjectionLabel: "enabled"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}}).Build()
	cfg := inject.DefaultConfig()
	cfg.DefaultDataNetwork = "net"
	h := NewPodInjector(reader, nil, admission.NewDecoder(scheme), cfg, "kube-fstack-system")
	h.Claims = &claims.Claimer{Writer: reader, Cached: reader, Live: reader, Namespace: "kube-fstack-system"}
	return h
}

// podJSON is the injector's fixture pod nginx-vhost with opts, as the API server sends it.
func podJSON(t testing.TB, opts ...fixtures.PodOption) []byte {
	t.Helper()
	raw, err := json.Marshal(fixtures.LoadPod(t, "nginx-vhost", opts...))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func request(ns string, pod []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: ns, Object: runtime.RawExtension{Raw: pod},
	}}
}

func TestHandle(t *testing.T) {
	h, pod := newInjector(t), podJSON(t)
	ctx := context.Background()
	resp := h.Handle(ctx, request("web", pod))
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("want an allowed response with patches, got %+v", resp.Result)
	}
	if resp := h.Handle(ctx, request("kube-fstack-system", pod)); !resp.Allowed || len(resp.Patches) != 0 {
		t.Fatal("the operator's own namespace was injected")
	}
	resp = h.Handle(ctx, request("web", podJSON(t, fixtures.WithStackLabel("nope"))))
	if resp.Allowed || !strings.Contains(resp.Result.Message, `StackInstance "nope" not found`) {
		t.Fatalf("missing stack: %+v", resp.Result)
	}
	resp = h.Handle(ctx, request("web", podJSON(t, fixtures.WithoutCommand("nginx"))))
	if resp.Allowed || resp.Result.Code != 422 || len(resp.Result.Details.Causes) == 0 || resp.Result.Details.Causes[0].Field != "spec.containers[0].command" {
		t.Fatalf("no command: %+v", resp.Result)
	}
}

// A StackInstance the cache has not seen yet (created a moment before its pods) is read live.
func TestHandleReadsLiveOnCacheMiss(t *testing.T) {
	h, pod := newInjector(t), podJSON(t)
	h.Live, h.Reader = h.Reader, fake.NewClientBuilder().WithScheme(h.Reader.(interface{ Scheme() *runtime.Scheme }).Scheme()).Build()
	if resp := h.Handle(context.Background(), request("web", pod)); !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("want the pod injected from the live read, got %+v", resp.Result)
	}
}

// A review the API server would not send (a namespace that has not opted in, or does not exist)
// gets the answer a missing StackInstance gets, whether or not one exists there or elsewhere:
// a caller posting reviews itself learns nothing about other namespaces' stacks.
func TestHandleAnswersOnlyOptedInNamespaces(t *testing.T) {
	h, pod := newInjector(t), podJSON(t)
	ctx := context.Background()
	want := func(ns string) string {
		return `StackInstance "vhost-user" not found in namespace "` + ns + `": create it before the pods that name it, or remove the pod label ` + fsv1.StackLabel
	}
	for _, ns := range []string{"quiet", "nowhere", "other"} { // has one, not opted in; no namespace; opted in, none there
		resp, msg := h.Handle(ctx, request(ns, pod)), ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		if resp.Allowed || len(resp.Patches) != 0 || msg != want(ns) {
			t.Errorf("namespace %q: allowed %v, %d patches, %q; want refused with %q", ns, resp.Allowed, len(resp.Patches), msg, want(ns))
		}
	}
}

// BenchmarkHandle is the webhook's work per pod: decode, read the stack, inject, diff to a patch.
func BenchmarkHandle(b *testing.B) {
	h := newInjector(b)
	req := request("web", podJSON(b))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(ctx, req); !resp.Allowed {
			b.Fatal(resp.Result)
		}
	}
}

// Every pod the webhook admits can be read by its status token: an injected one gets its own,
// one that arrives injected keeps its own, and one injected offline without a token (a
// workload of `kubectl fstack inject`) gets one.
func TestHandleGivesEveryPodAStatusToken(t *testing.T) {
	h := newInjector(t)
	ctx := context.Background()
	admitted := func(raw []byte) *corev1.Pod {
		t.Helper()
		resp := h.Handle(ctx, request("web", raw))
		if !resp.Allowed {
			t.Fatalf("refused: %+v", resp.Result)
		}
		return patched(t, raw, resp)
	}
	a, b := admitted(podJSON(t)), admitted(podJSON(t))
	if inject.StatusToken(a) == "" || inject.StatusToken(a) == inject.StatusToken(b) {
		t.Fatalf("tokens %q and %q: want one of its own for each pod", inject.StatusToken(a), inject.StatusToken(b))
	}
	raw, _ := json.Marshal(a)
	if again := admitted(raw); inject.StatusToken(again) != inject.StatusToken(a) {
		t.Errorf("an injected pod created again has token %q, want %q kept", inject.StatusToken(again), inject.StatusToken(a))
	}
	cfg := inject.DefaultConfig()
	cfg.OmitStatusToken = true
	offline, _, err := inject.Inject(fixtures.LoadPod(t, "nginx-vhost"), fixtures.Stack(t, "vhost-user"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = json.Marshal(offline)
	if got := admitted(raw); inject.StatusToken(got) == "" || inject.StatusToken(got) == inject.StatusToken(a) {
		t.Errorf("an offline-injected pod got token %q, want one of its own", inject.StatusToken(got))
	}
}

// patched applies resp's JSON patch to raw.
func patched(t *testing.T, raw []byte, resp admission.Response) *corev1.Pod {
	t.Helper()
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(out, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}
