package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// The floor arms: what any mutating webhook costs the API server on this machine, whatever
// the webhook does. Their server is the least a webhook can be (no decoding beyond the request
// UID, no framework), in its own process like the operator, with the same certificate and the
// same TLS setup as controller-runtime's webhook server.
const (
	floorNS      = "floor"
	floorPatchNS = "floor-patch"
	// floorAllow allows every pod unchanged; floorPatch returns the fixed patch it was started
	// with: the operator's patch, without the work of computing it.
	floorAllow = "floor-allow.bench.kubefstack.io"
	floorPatch = "floor-patch.bench.kubefstack.io"
	// floorPatchEnv carries the patch to the floor server's process.
	floorPatchEnv = "BENCH_FLOOR_PATCH"
)

// floorProcess is the floor webhook server running in its own process.
type floorProcess struct {
	cmd  *exec.Cmd
	addr string
	// stats is where it says how many TLS handshakes it made, how many calls it answered and
	// how long its handlers took in all.
	stats string
}

// startFloor runs this binary again as the floor server, on the operator's certificate, and
// registers its two webhooks.
func startFloor(ctx context.Context, c client.Client, wh *envtest.WebhookInstallOptions, patch []byte) (*floorProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr := freeAddr()
	cmd := exec.Command(self, "-floor-server="+addr, "-cert-dir="+wh.LocalServingCertDir)
	cmd.Env = append(os.Environ(), floorPatchEnv+"="+base64.StdEncoding.EncodeToString(patch))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	host := wh.LocalServingHostExternalName
	if host == "" {
		host = wh.LocalServingHost
	}
	_, port, _ := net.SplitHostPort(addr)
	f := &floorProcess{cmd: cmd, addr: addr, stats: "https://" + net.JoinHostPort(host, port) + "/stats"}
	if err := f.waitReady(wh.LocalServingCAData); err != nil {
		f.stop()
		return nil, err
	}
	if err := c.Create(ctx, floorWebhooks("https://"+net.JoinHostPort(host, port), wh.LocalServingCAData)); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

func (f *floorProcess) stop() { _ = f.cmd.Process.Kill(); _, _ = f.cmd.Process.Wait() }

// client trusts the floor server's CA.
func floorClient(caData []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caData)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func (f *floorProcess) waitReady(caData []byte) error {
	hc := floorClient(caData)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(f.stats)
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("floor webhook server not ready after 30s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// floorWebhooks are configured as the operator's injector is (config/webhook), but for one
// namespace each.
func floorWebhooks(base string, caData []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	sideEffects, fail, never := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail, admissionregistrationv1.NeverReinvocationPolicy
	timeout := int32(10)
	hook := func(name, path, namespace string) admissionregistrationv1.MutatingWebhook {
		url := base + path
		return admissionregistrationv1.MutatingWebhook{
			Name: name, AdmissionReviewVersions: []string{"v1"}, SideEffects: &sideEffects, FailurePolicy: &fail,
			TimeoutSeconds: &timeout, ReinvocationPolicy: &never,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caData},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: fsv1.StackLabel, Operator: metav1.LabelSelectorOpExists}}},
		}
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-floor"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			hook(floorAllow, "/allow", floorNS), hook(floorPatch, "/patch", floorPatchNS)},
	}
}

// serveFloor is the floor server's process: /allow answers Allowed with no patch, /patch
// Allowed with the patch from floorPatchEnv, /stats its TLS handshakes, calls and handler time.
func serveFloor(addr, certDir string) error {
	patch, err := base64.StdEncoding.DecodeString(os.Getenv(floorPatchEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", floorPatchEnv, err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return err
	}
	var handshakes, calls, busy atomic.Int64
	cfg := &tls.Config{NextProtos: []string{"h2"}, Certificates: []tls.Certificate{cert},
		VerifyConnection: func(tls.ConnectionState) error { handshakes.Add(1); return nil }}
	l, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	// timed measures what controller-runtime's webhook latency metric measures for the operator:
	// from the handler's start, before the body is read, to the response written.
	timed := func(patch []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			answer(w, r, patch)
			busy.Add(int64(time.Since(start)))
			calls.Add(1)
		}
	}
	mux.Handle("/allow", timed(nil))
	mux.Handle("/patch", timed(patch))
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, "%d %d %d", handshakes.Load(), calls.Load(), busy.Load())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(l)
}

// answer allows the AdmissionReview in r's body, with patch when there is one.
func answer(w http.ResponseWriter, r *http.Request, patch []byte) {
	var review struct {
		Request struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := map[string]any{"uid": review.Request.UID, "allowed": true}
	if patch != nil {
		resp["patchType"], resp["patch"] = "JSONPatch", patch
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
}
