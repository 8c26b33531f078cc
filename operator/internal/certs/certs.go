// Package certs keeps the webhook server's certificate: generated, rotated and its CA injected
// into the webhook configurations by cert-controller, a library built for exactly that, or left
// to cert-manager (which then mounts the secret and injects the CA itself).
package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options names what the rotator manages.
type Options struct {
	Namespace   string
	SecretName  string
	ServiceName string
	// MetricsServiceName, when set, is the operator's metrics Service: the certificate names
	// it too, so Prometheus verifies the metrics endpoint against the same CA.
	MetricsServiceName string
	CertDir            string
	MutatingName       string
	ValidatingName     string
	// ControllerName names the rotator's controller; empty is cert-controller's default. Names
	// are unique per process, so only a test running several replicas in one sets it.
	ControllerName string
}

// cert-controller reads the webhook configurations through an informer (list and watch, which a
// name cannot limit: its informer has no field selector) and the Secret through one narrowed to
// its name (withSecretByName, so RBAC grants list and watch of that Secret alone), and writes
// them with Update. Writes are limited to the objects the operator manages; the names here are the flags'
// defaults, and the chart replaces them with the release's (charts/kube-fstack/templates/_helpers.tpl).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=update,resourceNames=kube-fstack-injector
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=update,resourceNames=kube-fstack-validator
// A create cannot be limited to a name (EnsureSecret makes the Secret when it is missing).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create,namespace=kube-fstack-system
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch;update,resourceNames=kube-fstack-webhook-cert,namespace=kube-fstack-system

// EnsureSecret creates the empty secret the rotator fills: cert-controller only updates an
// existing one, and an install that forgot it would otherwise never serve its webhooks.
func EnsureSecret(ctx context.Context, c client.Client, o Options) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.SecretName,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "kube-fstack"}}}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the webhook certificate secret %s/%s: %w", o.Namespace, o.SecretName, err)
	}
	return dropCertWithoutMetrics(ctx, c, o)
}

// dropCertWithoutMetrics removes a serving certificate that does not name the metrics Service
// (one issued before --metrics-service, by an older operator): cert-controller checks only the
// webhook's name, so it would keep serving it until it expires and scrapers that verify the
// metrics Service's name would fail until then. Without it the rotator issues a new one under
// the same CA at once; the CA, which the webhook configurations trust, is kept. The Secret is
// listed by name, not got: the operator may list and watch that one Secret but get none.
func dropCertWithoutMetrics(ctx context.Context, c client.Client, o Options) error {
	if o.MetricsServiceName == "" {
		return nil
	}
	list := &corev1.SecretList{}
	if err := c.List(ctx, list, client.InNamespace(o.Namespace), client.MatchingFields{"metadata.name": o.SecretName}); err != nil {
		return fmt.Errorf("read the webhook certificate secret %s/%s: %w", o.Namespace, o.SecretName, err)
	}
	if len(list.Items) != 1 {
		return nil
	}
	s := &list.Items[0]
	block, _ := pem.Decode(s.Data["tls.crt"])
	if block == nil {
		return nil // empty or unreadable: the rotator issues one anyway
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err == nil && cert.VerifyHostname(fmt.Sprintf("%s.%s.svc", o.MetricsServiceName, o.Namespace)) == nil {
		return nil
	}
	delete(s.Data, "tls.crt")
	delete(s.Data, "tls.key")
	if err := c.Update(ctx, s); err != nil && !apierrors.IsConflict(err) { // a conflict: another replica did it
		return fmt.Errorf("drop the webhook certificate that does not name the metrics Service from %s/%s: %w", o.Namespace, o.SecretName, err)
	}
	return nil
}

// AddRotator adds certificate rotation to mgr; ready is closed once the certificate is on disk.
func AddRotator(mgr ctrl.Manager, o Options, ready chan struct{}) error {
	dns := fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace)
	extra := []string{dns + ".cluster.local", o.ServiceName + "." + o.Namespace}
	if m := o.MetricsServiceName; m != "" {
		mdns := fmt.Sprintf("%s.%s.svc", m, o.Namespace)
		extra = append(extra, mdns, mdns+".cluster.local", m+"."+o.Namespace)
	}
	return rotator.AddRotator(withSecretByName(mgr, o.Namespace, o.SecretName), &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName},
		CertDir:        o.CertDir,
		CAName:         "kube-fstack-ca",
		CAOrganization: "kube-fstack",
		DNSName:        dns,
		ExtraDNSNames:  extra,
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: o.MutatingName, Type: rotator.Mutating},
			{Name: o.ValidatingName, Type: rotator.Validating},
		},
		// Every replica serves webhooks, so every replica needs the certificate on disk. Several
		// rotators share the Secret safely: each writes it with an update conditioned on the
		// version it read, so of two that found it empty one gets a conflict, reads the other's
		// CA and certificate, and keeps them (envtest TestReplicasShareOneCertificate).
		RequireLeaderElection: false,
		ControllerName:        o.ControllerName,
	})
}

// maxClientCAFile bounds the client CA file: a bundle of a few CAs is a few KiB.
const maxClientCAFile = 1 << 20

// RequireClientCerts returns the webhook server's TLS option that accepts only callers with a
// certificate signed by a CA in caFile: the API server, where its admission configuration gives
// it a client certificate for the webhook (a kubeconfig per webhook). Without it any pod could
// post an AdmissionReview and read what the injector's answer carries.
func RequireClientCerts(caFile string) (func(*tls.Config), error) {
	f, err := os.Open(caFile)
	if err != nil {
		return nil, fmt.Errorf("--webhook-client-ca: %w (the CA that signs the API server's webhook client certificate; the chart's webhook.clientCA)", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxClientCAFile+1))
	if err != nil {
		return nil, fmt.Errorf("--webhook-client-ca %s: %w", caFile, err)
	}
	if len(raw) > maxClientCAFile {
		return nil, fmt.Errorf("--webhook-client-ca %s: larger than %d bytes; give the PEM CA certificates only", caFile, maxClientCAFile)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("--webhook-client-ca %s: no PEM certificate in it; give the CA that signs the API server's webhook client certificate", caFile)
	}
	return func(c *tls.Config) {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = pool
	}, nil
}

// Served loads the serving certificate (tls.crt, tls.key) from dir at each handshake, again
// whenever the files change: the kubelet updates the mounted Secret when the rotator or
// cert-manager renews it. Until the first certificate is there, handshakes fail, which a scrape
// retries; nothing else waits for it.
type Served struct {
	Dir string

	mu     sync.Mutex
	cert   *tls.Certificate
	stamps [2]time.Time
}

// GetCertificate is a tls.Config GetCertificate.
func (s *Served) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certFile, keyFile := filepath.Join(s.Dir, "tls.crt"), filepath.Join(s.Dir, "tls.key")
	var stamps [2]time.Time
	for i, f := range []string{certFile, keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("the serving certificate is not there yet: %w", err)
		}
		stamps[i] = fi.ModTime()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert != nil && stamps == s.stamps {
		return s.cert, nil
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the serving certificate from %s: %w", s.Dir, err)
	}
	s.cert, s.stamps = &c, stamps
	return s.cert, nil
}
