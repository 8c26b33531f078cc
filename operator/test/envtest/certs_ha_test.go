package envtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/certs"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
)

// replica is one operator pod's manager: its own cert dir (the Secret's volume), webhook port
// and readiness endpoint.
type replica struct {
	certDir           string
	webhookPort, port int
}

// TestReplicasShareOneCertificate: two replicas start at once on a Secret that does not exist yet,
// as `helm install` with operator.replicas 2 starts them. Each runs the certificate rotator (every
// replica serves the webhooks), so both find the Secret empty and issue a CA; the Secret must
// still end with one, which both webhook configurations carry, and both replicas must become
// ready serving a certificate that verifies against it. A replica that overwrote the other's CA
// after it was injected would leave the API server trusting a CA one replica no longer serves.
func TestReplicasShareOneCertificate(t *testing.T) {
	ctx := context.Background()
	const secret = "certs-ha"
	mut, val := decoyWebhooks(t, "certs-ha-injector", "certs-ha-validator")
	replicas := []*replica{newReplica(t), newReplica(t)}
	mgrs := make([]ctrl.Manager, len(replicas))
	for i, r := range replicas {
		mgr, err := manager.New(restCfg, manager.Options{
			MetricsAddr: "0", ProbeAddr: fmt.Sprintf("127.0.0.1:%d", r.port), Namespace: operatorNS,
			WebhookHost: "127.0.0.1", WebhookPort: r.webhookPort, CertDir: r.certDir, ManageCerts: true,
			LeaderElect: true, Inject: injectConfig(), SecondInProcess: true,
			Certs: certs.Options{SecretName: secret, ServiceName: "kube-fstack-webhook",
				MutatingName: mut.Name, ValidatingName: val.Name, ControllerName: fmt.Sprintf("cert-rotator-replica-%d", i)},
		}, ctrl.Log.WithName(fmt.Sprintf("replica-%d", i)))
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		mgrs[i] = mgr
	}
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, len(mgrs))
	start := make(chan struct{})
	for i, mgr := range mgrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = mgr.Start(mctx)
		}()
	}
	close(start)
	defer func() {
		cancel()
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("replica %d stopped with: %v", i, err)
			}
		}
	}()

	var ca []byte
	testenv.Eventually(t, 60*time.Second, func() error {
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: secret}, s); err != nil {
			return err
		}
		if len(s.Data["ca.crt"]) == 0 || len(s.Data["tls.crt"]) == 0 {
			return fmt.Errorf("secret has keys %v", keys(s.Data))
		}
		if err := injected(ctx, mut.Name, val.Name, s.Data["ca.crt"]); err != nil {
			return err
		}
		// The kubelet projects the same Secret into every replica's volume.
		for _, r := range replicas {
			for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
				if err := os.WriteFile(filepath.Join(r.certDir, f), s.Data[f], 0o600); err != nil {
					return err
				}
			}
		}
		ca = s.Data["ca.crt"]
		return nil
	})

	for i, r := range replicas {
		testenv.Eventually(t, 90*time.Second, func() error { return r.ready() })
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: secret}, s); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s.Data["ca.crt"], ca) {
			t.Fatalf("replica %d became ready after the Secret's CA was replaced: two replicas each issued their own", i)
		}
		if err := injected(ctx, mut.Name, val.Name, ca); err != nil {
			t.Fatalf("replica %d ready: %v", i, err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.webhookPort), &tls.Config{
			RootCAs: pool, ServerName: "kube-fstack-webhook." + operatorNS + ".svc", MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("replica %d serves a certificate the webhook configurations' CA does not verify: %v", i, err)
		}
		_ = conn.Close()
	}
}

func newReplica(t *testing.T) *replica {
	return &replica{certDir: t.TempDir(), webhookPort: freePort(t), port: freePort(t)}
}

// ready is the replica's readiness probe (the chart's /readyz).
func (r *replica) ready() error {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", r.port))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: HTTP %d", resp.StatusCode)
	}
	return nil
}

// injected checks that every webhook of both configurations trusts ca.
func injected(ctx context.Context, mutName, valName string, ca []byte) error {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: mutName}, m); err != nil {
		return err
	}
	if err := k8s.Get(ctx, types.NamespacedName{Name: valName}, v); err != nil {
		return err
	}
	bundles := [][]byte{}
	for _, w := range m.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, w := range v.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, b := range bundles {
		if !bytes.Equal(b, ca) {
			return fmt.Errorf("a webhook configuration does not carry the Secret's CA (yet)")
		}
	}
	return nil
}
