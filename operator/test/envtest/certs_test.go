package envtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/certs"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
)

// The operator manages its own webhook certificate: it creates the secret, fills it with a CA and
// a serving certificate, puts the CA into both webhook configurations, and serves the
// certificate once it is mounted. The configurations here are decoys (they match nothing) so the
// suite's own webhooks, served with envtest's certificate, keep working.
//
// It does so on the RBAC controller-gen generates (config/rbac/role.yaml) and nothing more, its
// resourceNames renamed as the chart renames them for a release: as a user bound to exactly
// those rules it also holds the leader Lease and authenticates metrics scrapes, and a webhook
// configuration it was not told about is out of its reach.
func TestOperatorManagesWebhookCertificates(t *testing.T) {
	ctx := context.Background()
	mut, val := decoyWebhooks(t, "certs-test-injector", "certs-test-validator")
	user := operatorUser(t, map[string]string{"kube-fstack-injector": mut.Name, "kube-fstack-validator": val.Name,
		"kube-fstack-webhook-cert": "certs-test", leaseName: leaseName})
	// It reads one Secret, the certificate's: the other Secrets of its namespace are not its to list.
	if err := user.List(ctx, &corev1.SecretList{}, client.InNamespace(operatorNS)); !apierrors.IsForbidden(err) {
		t.Fatalf("the operator may list every Secret of its namespace: %v, want forbidden", err)
	}
	other, _ := decoyWebhooks(t, "certs-test-other", "certs-test-other")
	other.Webhooks[0].TimeoutSeconds = new(int32(3))
	if err := user.Update(ctx, other); !apierrors.IsForbidden(err) {
		t.Fatalf("the operator may update a webhook configuration it does not manage: %v", err)
	}
	// The Secret of an older operator: a CA and a serving certificate that names the webhook
	// Service only, both valid for long. cert-controller would keep serving it; the operator
	// has it reissued under the same CA so the metrics Service is named too.
	staleCA := staleWebhookSecret(t, "certs-test")
	certDir := t.TempDir()
	webhookPort := freePort(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	mgr, err := manager.New(user.cfg, manager.Options{
		MetricsAddr: metrics, ProbeAddr: "0", Namespace: operatorNS, WebhookHost: "127.0.0.1", WebhookPort: webhookPort,
		CertDir: certDir, ManageCerts: true, LeaderElect: true, Inject: injectConfig(), SecondInProcess: true,
		MetricsCertDir: certDir,
		Certs: certs.Options{SecretName: "certs-test", ServiceName: "kube-fstack-webhook", MetricsServiceName: "kube-fstack-metrics",
			MutatingName: mut.Name, ValidatingName: val.Name},
	}, ctrl.Log)
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second manager: %v", err)
		}
	}()
	waitLeader(t)
	testenv.Eventually(t, 60*time.Second, func() error {
		secret := &corev1.Secret{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: "certs-test"}, secret); err != nil {
			return err
		}
		ca := secret.Data["ca.crt"]
		if len(ca) == 0 || len(secret.Data["tls.crt"]) == 0 || len(secret.Data["tls.key"]) == 0 {
			return fmt.Errorf("secret has keys %v", keys(secret.Data))
		}
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: mut.Name}, m); err != nil {
			return err
		}
		if err := k8s.Get(ctx, types.NamespacedName{Name: val.Name}, v); err != nil {
			return err
		}
		if !bytes.Equal(m.Webhooks[0].ClientConfig.CABundle, ca) || !bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, ca) ||
			!bytes.Equal(v.Webhooks[1].ClientConfig.CABundle, ca) {
			return fmt.Errorf("caBundle not injected into both webhook configurations yet")
		}
		return nil
	})

	// In a pod the secret is a volume at the cert dir; no kubelet here, so the test writes the
	// files as the secret volume would. The webhook server then serves the rotator's
	// certificate, valid for the Service's DNS name under the injected CA.
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: "certs-test"}, secret); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data["ca.crt"], staleCA) {
		t.Errorf("the CA of the existing Secret was replaced; only the serving certificate needed reissuing")
	}
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(certDir, f), secret.Data[f], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(secret.Data["ca.crt"])
	testenv.Eventually(t, 60*time.Second, func() error {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", webhookPort), &tls.Config{
			RootCAs: pool, ServerName: "kube-fstack-webhook." + operatorNS + ".svc", MinVersion: tls.VersionTLS12})
		if err != nil {
			return err
		}
		return conn.Close()
	})
	// Its metrics endpoint serves the same certificate, which names the metrics Service too, so
	// a scraper verifies it against the operator's CA (the chart's ServiceMonitor does); it may
	// ask the API server who a scraper is and whether it may read (TokenReview,
	// SubjectAccessReview).
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	token := metricsReaderToken(t, cs, "certs-scraper")
	verified := &tls.Config{RootCAs: pool, ServerName: "kube-fstack-metrics." + operatorNS + ".svc", MinVersion: tls.VersionTLS12}
	testenv.Eventually(t, 30*time.Second, func() error {
		code, body, err := scrapeWith(metrics, token, verified)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("scrape with a metrics-reader token: %d %.100s", code, body)
		}
		return err
	})
}

// staleWebhookSecret creates the Secret name as an operator without --metrics-service left it
// and returns its CA certificate (PEM). Keys are PKCS#1 RSA, as cert-controller writes them.
func staleWebhookSecret(t *testing.T, name string) []byte {
	t.Helper()
	newKey := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, key := newKey(), newKey()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-fstack-ca", Organization: []string{"kube-fstack"}},
		DNSNames: []string{"kube-fstack-ca"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	svc := "kube-fstack-webhook." + operatorNS + ".svc"
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: svc},
		DNSNames: []string{svc}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	block := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	caPEM := block("CERTIFICATE", caDER)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: name}, Data: map[string][]byte{
		"ca.crt": caPEM, "ca.key": block("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caKey)),
		"tls.crt": block("CERTIFICATE", leafDER), "tls.key": block("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))}}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), s) })
	return caPEM
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// decoyWebhooks creates webhook configurations that match nothing, so the suite's own webhooks
// (served with envtest's certificate) keep working whatever CA an operator puts into these.
func decoyWebhooks(t *testing.T, mutName, valName string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	none := &metav1.LabelSelector{MatchLabels: map[string]string{"kubefstack.io/never": "true"}}
	port := int32(443)
	ref := admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: operatorNS, Name: "kube-fstack-webhook", Port: &port}}
	sideEffects := admissionregistrationv1.SideEffectClassNone
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	mut := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: mutName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "decoy.kubefstack.io", ClientConfig: ref, Rules: rules,
			NamespaceSelector: none, SideEffects: &sideEffects, AdmissionReviewVersions: []string{"v1"}}}}
	val := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: valName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "decoy.kubefstack.io", ClientConfig: ref, Rules: rules,
			NamespaceSelector: none, SideEffects: &sideEffects, AdmissionReviewVersions: []string{"v1"}},
			// The validator has two webhooks (StackInstances, pod updates): both need the CA.
			{Name: "decoy2.kubefstack.io", ClientConfig: ref, Rules: rules,
				NamespaceSelector: none, SideEffects: &sideEffects, AdmissionReviewVersions: []string{"v1"}}}}
	if err := k8s.Create(context.Background(), mut); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(context.Background(), val); err != nil {
		t.Fatal(err)
	}
	return mut, val
}
