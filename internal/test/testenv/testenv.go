// Package testenv describes the API server the envtest suites (the operator's, the plugin's) and
// the operator's benchmark run against: kube-apiserver and etcd from KUBEBUILDER_ASSETS
// (hack/envtest-assets.sh), with the project's CRDs installed, and the webhook configurations for
// a suite that runs the operator.
package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Environment returns the envtest environment for the repository at root: its CRDs, no webhooks.
func Environment(root string) *envtest.Environment {
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
}

// InstallWebhooks has env's API server call the operator's webhooks (config/webhook): only for a
// suite that serves them, since their failurePolicy is Fail. Call it before env.Start.
func InstallWebhooks(env *envtest.Environment, root string) {
	env.WebhookInstallOptions.Paths = []string{filepath.Join(root, "config", "webhook")}
}

// WebhookClient is the client certificate the API server presents to the webhooks, as a
// cluster's admission configuration gives it one (hack/cluster does the same).
type WebhookClient struct {
	// CAFile signs CertFile: the operator's --webhook-client-ca.
	CAFile, CertFile, KeyFile string
}

// SendWebhookClientCert makes env's API server present a client certificate to every webhook
// it calls (an AdmissionConfiguration whose kubeconfig names it for "*"), made in dir under a
// CA of its own. Call it before env.Start.
func SendWebhookClientCert(env *envtest.Environment, dir string) (WebhookClient, error) {
	wc := WebhookClient{CAFile: filepath.Join(dir, "webhook-client-ca.crt"),
		CertFile: filepath.Join(dir, "webhook-client.crt"), KeyFile: filepath.Join(dir, "webhook-client.key")}
	caKey, caCert, err := newCert("kube-fstack envtest webhook client CA", nil, nil)
	if err != nil {
		return wc, err
	}
	key, cert, err := newCert("kube-apiserver-webhook-client", caCert, caKey)
	if err != nil {
		return wc, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return wc, err
	}
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	admission := filepath.Join(dir, "admission.yaml")
	files := map[string][]byte{
		wc.CAFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}),
		wc.CertFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		wc.KeyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		kubeconfig: fmt.Appendf(nil, "apiVersion: v1\nkind: Config\nusers:\n- name: \"*\"\n  user:\n    client-certificate: %q\n    client-key: %q\n",
			wc.CertFile, wc.KeyFile),
		admission: fmt.Appendf(nil, admissionConfig, kubeconfig, kubeconfig),
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			return wc, err
		}
	}
	env.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", admission)
	return wc, nil
}

// admissionConfig gives both webhook admission plugins the kubeconfig of the client certificate.
const admissionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %q
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %q
`

// newCert makes a key and a certificate for cn: a CA when parent is nil, else a client
// certificate parent signs.
func newCert(cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, err
}
