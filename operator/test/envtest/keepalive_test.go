package envtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	fswebhook "github.com/kube-fstack/kube-fstack/operator/internal/webhook"
)

// reviewClient posts admission reviews to one webhook server as the API server does: with its
// client certificate, keeping connections alive, over HTTP/1.1 (what it speaks to a service
// reference) or HTTP/2 (to a loopback URL).
type reviewClient struct {
	t      *testing.T
	c      *http.Client
	server string
}

func newReviewClient(t *testing.T, port int, h2 bool) *reviewClient {
	t.Helper()
	wh := env.WebhookInstallOptions
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(wh.LocalServingCAData)
	apiserver, err := tls.LoadX509KeyPair(webhookClient.CertFile, webhookClient.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	protos := []string{"http/1.1"}
	if h2 {
		protos = []string{"h2"}
	}
	tr := &http.Transport{ForceAttemptHTTP2: h2, TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{apiserver},
		NextProtos: protos, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &reviewClient{t: t, c: &http.Client{Timeout: 30 * time.Second, Transport: tr},
		server: "https://" + net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(port))}
}

// answer is what one review got back and on which connection.
type answer struct {
	reused, closes bool
	proto          string
	patch          int
}

// post sends review to path and wants an allowed AdmissionReview back.
func (r *reviewClient) post(path string, review []byte) answer {
	r.t.Helper()
	var a answer
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { a.reused = info.Reused }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.server+path, bytes.NewReader(review))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.c.Do(req)
	if err != nil {
		r.t.Fatalf("review to %s: %v", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, out); err != nil || out.Response == nil || !out.Response.Allowed {
		r.t.Fatalf("review to %s: answer %d %q, want an allowed AdmissionReview (%v)", path, resp.StatusCode, body, err)
	}
	a.closes, a.proto, a.patch = resp.Close, resp.Proto, len(out.Response.Patch)
	return a
}

// The webhook server keeps the API server's connection for the next review, over both protocols
// the API server speaks: one TLS handshake per connection, not one per admitted pod (every
// answer carried Connection: close before, which made the bench's 200 creates 200 handshakes).
func TestWebhookKeepsConnectionsAcrossReviews(t *testing.T) {
	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Name = "keepalive"
	testenv.CreateIfAbsent(t, k8s, stack(t, inject.StackName(pod), inject.StackName(pod)))
	review := injectReview(t, pod)
	for _, h2 := range []bool{false, true} {
		c := newReviewClient(t, env.WebhookInstallOptions.LocalServingPort, h2)
		first, second := c.post(fswebhook.InjectPath, review), c.post(fswebhook.InjectPath, review)
		if first.patch == 0 || second.patch == 0 {
			t.Fatalf("%s: the pod was not injected (%d, %d bytes of patch)", first.proto, first.patch, second.patch)
		}
		if first.closes || second.closes || !second.reused {
			t.Fatalf("%s: the answers end their connection (%v, %v) or the second review dialed again (reused %v)",
				first.proto, first.closes, second.closes, second.reused)
		}
		if want := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]; first.proto != want {
			t.Fatalf("answered over %s, want %s", first.proto, want)
		}
	}
}
