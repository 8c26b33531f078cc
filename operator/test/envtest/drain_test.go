package envtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
	fswebhook "github.com/kube-fstack/kube-fstack/operator/internal/webhook"
)

// A replica told to stop drains before it stops: its readiness fails at once, and every review
// it is still sent, on a connection the API server kept or on a new one (a proxy that has not
// yet dropped the endpoint), is answered, the answer ending its connection (HTTP/1.1: the
// client reads Connection: close with the response; HTTP/2: a GOAWAY, after which the server
// closes the connection itself), so the API server's next review dials a replica that stays
// and none meets a connection cut under it. The StackInstance validator, registered by
// controller-runtime's builder, drains too. The manager stops when the drain ends.
func TestDrainingReplicaEndsEachConnectionAfterItsAnswer(t *testing.T) {
	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Name = "draining"
	testenv.CreateIfAbsent(t, k8s, stack(t, inject.StackName(pod), inject.StackName(pod)))
	review := injectReview(t, pod)
	wh := env.WebhookInstallOptions
	webhookPort, probe := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	drain := &manager.Drain{}
	mgr, err := manager.New(restCfg, manager.Options{
		MetricsAddr: "0", ProbeAddr: probe, Namespace: operatorNS, WebhookHost: wh.LocalServingHost, WebhookPort: webhookPort,
		CertDir: wh.LocalServingCertDir, LeaderElect: true, Inject: injectConfig(), SecondInProcess: true, Drain: drain,
	}, ctrl.Log)
	if err != nil {
		t.Fatal(err)
	}
	// The drain ends when the test says (parent), never by the clock: the delay is far longer.
	parent, stop := context.WithCancel(context.Background())
	signaled, signal := context.WithCancel(context.Background())
	defer signal()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(manager.StopAfterDrain(parent, signaled, drain, time.Hour, ctrl.Log)) }()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the draining manager: %v", err)
			}
		case <-time.After(2 * time.Minute):
			t.Error("the draining manager did not stop once told to")
		}
	}()
	readyz := func() error {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	}
	testenv.Eventually(t, 60*time.Second, readyz)

	h1, h2 := newReviewClient(t, webhookPort, false), newReviewClient(t, webhookPort, true)
	siReview := stackInstanceReview(t, inject.StackName(pod))
	for _, c := range []*reviewClient{h1, h2} {
		for _, path := range []string{fswebhook.InjectPath, stackInstanceValidatePath} {
			body := map[string][]byte{fswebhook.InjectPath: review, stackInstanceValidatePath: siReview}[path]
			if a := c.post(path, body); a.closes {
				t.Fatalf("%s %s: the answer ends its connection before any drain", a.proto, path)
			}
		}
	}

	signal()
	testenv.Eventually(t, 60*time.Second, func() error {
		if readyz() == nil {
			return fmt.Errorf("still ready while draining")
		}
		return nil
	})
	// HTTP/1.1: on the kept connection, answered, and the answer ends it; the next review dials
	// and is answered too (the listener stays open through the drain), its answer ending that
	// connection as well (the StackInstance validator's, which the builder registered).
	if a := h1.post(fswebhook.InjectPath, review); !a.reused || !a.closes || a.patch == 0 {
		t.Fatalf("HTTP/1.1 while draining: on the kept connection %v, ends it %v, %d bytes of patch; want both and the patch", a.reused, a.closes, a.patch)
	}
	if a := h1.post(stackInstanceValidatePath, siReview); a.reused || !a.closes {
		t.Fatalf("HTTP/1.1 after an answer that ended the connection: reused %v, ends it %v; want a new connection, ended too", a.reused, a.closes)
	}
	// HTTP/2: answered on the kept connection, which the server then ends (GOAWAY); the next
	// review goes on a new connection.
	if a := h2.post(fswebhook.InjectPath, review); !a.reused || a.patch == 0 {
		t.Fatalf("HTTP/2 while draining: on the kept connection %v, %d bytes of patch", a.reused, a.patch)
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		if a := h2.post(stackInstanceValidatePath, siReview); a.reused {
			return fmt.Errorf("HTTP/2: a review still goes on the connection the server answered while draining")
		}
		return nil
	})
}

// stackInstanceValidatePath is where controller-runtime's builder serves the StackInstance
// validator (config/webhook names it for the API server).
const stackInstanceValidatePath = "/validate-kubefstack-io-v1alpha1-stackinstance"

// stackInstanceReview asks to validate the create of a copy of the StackInstance fixture.
func stackInstanceReview(t *testing.T, fixture string) []byte {
	t.Helper()
	si := stack(t, fixture, "drain-review")
	raw, err := json.Marshal(si)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "review-si", Namespace: si.Namespace, Name: si.Name, Operation: admissionv1.Create,
			Kind:     metav1.GroupVersionKind{Group: fsv1.GroupVersion.Group, Version: fsv1.GroupVersion.Version, Kind: "StackInstance"},
			Resource: metav1.GroupVersionResource{Group: fsv1.GroupVersion.Group, Version: fsv1.GroupVersion.Version, Resource: "stackinstances"},
			Object:   runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
