package envtest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	fswebhook "github.com/kube-fstack/kube-fstack/operator/internal/webhook"
)

// The webhook server answers only callers whose client certificate the API server's webhook
// client CA signed. A review posted by anyone else, as a pod could post one to :9443 (it
// returned the opted-in namespace's StackInstance spec in the patch), is refused in the TLS
// handshake; the API server, which presents its certificate, is still answered.
func TestWebhookAnswersOnlyTheAPIServer(t *testing.T) {
	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Name = "webhook-auth"
	testenv.CreateIfAbsent(t, k8s, stack(t, inject.StackName(pod), inject.StackName(pod)))
	review := injectReview(t, pod)
	wh := env.WebhookInstallOptions
	url := "https://" + net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)) + fswebhook.InjectPath
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(wh.LocalServingCAData)
	post := func(certs ...tls.Certificate) (*admissionv1.AdmissionReview, error) {
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}}
		resp, err := c.Post(url, "application/json", bytes.NewReader(review))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		out := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, out); err != nil || out.Response == nil {
			t.Fatalf("answer %d %q is not an AdmissionReview: %v", resp.StatusCode, body, err)
		}
		return out, nil
	}
	if out, err := post(); err == nil {
		t.Fatalf("a review without a client certificate was answered: allowed %v, %d bytes of patch", out.Response.Allowed, len(out.Response.Patch))
	} else if !strings.Contains(err.Error(), "tls") {
		t.Fatalf("a review without a client certificate: %v, want a TLS refusal", err)
	}
	if out, err := post(selfSignedClient(t)); err == nil {
		t.Fatalf("a review with a certificate of another CA was answered: allowed %v", out.Response.Allowed)
	}
	apiserver, err := tls.LoadX509KeyPair(webhookClient.CertFile, webhookClient.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := post(apiserver); err != nil || !out.Response.Allowed || len(out.Response.Patch) == 0 {
		t.Fatalf("with the API server's client certificate: %+v %v, want the pod's patch", out, err)
	}
	// And through the API server itself.
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatalf("create through the API server: %v", err)
	}
	testenv.DeleteAtEnd(t, k8s, pod)
	if pod.Annotations[fsv1.StatusAnnotation] == "" {
		t.Fatalf("the pod created through the API server was not injected")
	}
}

func injectReview(t *testing.T, pod any) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		// A dry run: no pod follows this review, so it must claim no address.
		Request: &admissionv1.AdmissionRequest{UID: "review-1", Namespace: optedInNS, Operation: admissionv1.Create, DryRun: new(true),
			Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Object:   runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// selfSignedClient is a client certificate no CA the operator trusts signed.
func selfSignedClient(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-apiserver-webhook-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
