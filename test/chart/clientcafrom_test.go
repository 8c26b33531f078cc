package chart

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testWebhookClientCAFrom: webhook.clientCAFrom.enabled copies the client CA from a ConfigMap the
// cluster publishes (here a stand-in of extension-apiserver-authentication, which envtest's API
// server fills without a front-proxy CA), so requiring the API server's client certificate is
// one --set; without the ConfigMap's key the install is refused, saying what to give instead.
// A server dry run: lookup reads the cluster, nothing is installed.
func testWebhookClientCAFrom(t *testing.T, c client.Client, kubeconfig string) {
	ctx := context.Background()
	const ns, pem = "ca-source", "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "authn"},
		Data: map[string]string{"requestheader-client-ca-file": pem}}); err != nil {
		t.Fatal(err)
	}
	install := func(name string) (string, string, error) {
		return helm(t, "install", "ca-from", chartDir, "-n", "ca-from", "--dry-run=server", "--kubeconfig", kubeconfig,
			"--set", "crds.enabled=false",
			"--set", "webhook.clientCAFrom.enabled=true", "--set", "webhook.clientCAFrom.namespace="+ns,
			"--set", "webhook.clientCAFrom.name="+name)
	}
	out, stderr, err := install("authn")
	if err != nil {
		t.Fatalf("helm install --dry-run=server with webhook.clientCAFrom: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "--webhook-client-ca=/etc/kube-fstack/webhook-client-ca/ca.crt") ||
		!strings.Contains(out, `ca.crt: "-----BEGIN CERTIFICATE-----\nMIIBfake`) {
		t.Errorf("with webhook.clientCAFrom the operator does not require the copied CA:\n%s", out)
	}
	if _, stderr, err := install("missing"); err == nil || !strings.Contains(stderr, "webhook.clientCAFrom: ConfigMap ca-source/missing has no PEM certificate") ||
		!strings.Contains(stderr, "--set-file webhook.clientCA") {
		t.Errorf("a clientCAFrom naming no CA: %v\n%s; want refused, saying what to give", err, stderr)
	}
}
