// Package envtest runs the operator against a real kube-apiserver and etcd (envtest, with
// KUBEBUILDER_ASSETS prepared by hack/envtest-assets.sh): the CRD's schema and CEL, both webhooks
// called by the API server, and the controller on real watches. There is no kubelet: where a
// test needs a pod to report its dataplane ready it writes the pod's status itself, as kubelet
// would, and says so.
package envtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
)

const (
	operatorNS = "kube-fstack-system"
	optedInNS  = "web"
	plainNS    = "plain"
	// baselineNS is opted in and enforces Pod Security "baseline" (the API server's own
	// PodSecurity admission plugin, on by default).
	baselineNS = "tenant"
)

var (
	k8s     client.Client
	restCfg *rest.Config
	env     *envtest.Environment
	// metricsAddr is where the suite's operator serves its metrics.
	metricsAddr string
	// webhookClient is the client certificate the API server presents to the webhooks.
	webhookClient testenv.WebhookClient
	// operatorCache is the suite's operator's cache: what the controllers and webhook read.
	operatorCache cache.Cache
	root          = filepath.Join("..", "..", "..")
)

// injectConfig is what the goldens of internal/inject were made with (their status token
// included), and an allow-list of dataplane images (--allowed-dataplane-images) that admits the
// test stacks' own image.
func injectConfig() inject.Config {
	cfg := inject.DefaultConfig()
	cfg.ImagePullPolicy = corev1.PullIfNotPresent
	cfg.StatusTokens = fixtures.StatusTokens()
	cfg.AllowedImages = []string{allowedImages}
	cfg.DefaultDataNetwork = dataNetwork
	return cfg
}

// dataNetwork is the DataNetwork of every port of the suite that names none.
const dataNetwork = "envtest-net"

const allowedImages = "registry.example/fstack/"

// claimGrace is the suite's operator's --claim-grace: long, so that the tests that claim without pods
// (TestReplicasNeverShareAnAddress) see their claims kept; shortGraceOperator runs a short one.
const claimGrace = 2 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test-envtest`, which builds kube-apiserver and finds etcd (hack/envtest-assets.sh)")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	env = testenv.Environment(root)
	testenv.InstallWebhooks(env, root)
	pki, err := os.MkdirTemp("", "kube-fstack-envtest-pki-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "webhook client PKI: %v\n", err)
		return 1
	}
	defer os.RemoveAll(pki)
	// The API server presents a client certificate to the webhooks, and the operator requires
	// one: every webhook call in the suite takes the path a cluster configured so takes.
	if webhookClient, err = testenv.SendWebhookClientCert(env, pki); err != nil {
		fmt.Fprintf(os.Stderr, "webhook client certificate: %v\n", err)
		return 1
	}
	cfg, err := testenv.Start(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	restCfg = cfg
	stop, err := startManager(cfg, &env.WebhookInstallOptions)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the operator: %v\n", err)
		return 1
	}
	defer stop()
	if err := setupNamespaces(); err != nil {
		fmt.Fprintf(os.Stderr, "namespaces: %v\n", err)
		return 1
	}
	return m.Run()
}

// zapLevel keeps the operator quiet unless OPERATOR_LOG is set.
func zapLevel() zapcore.Level {
	if os.Getenv("OPERATOR_LOG") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

func startManager(cfg *rest.Config, wh *envtest.WebhookInstallOptions) (func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	metricsAddr = l.Addr().String()
	_ = l.Close()
	statusPort, err := supervisor.start()
	if err != nil {
		return nil, err
	}
	// Metrics as the chart serves them: HTTPS, every scrape authenticated and authorized by the
	// API server.
	mgr, err := manager.New(cfg, manager.Options{
		MetricsAddr: metricsAddr, ProbeAddr: "0", Namespace: operatorNS,
		WebhookHost: wh.LocalServingHost, WebhookPort: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
		WebhookClientCA: webhookClient.CAFile,
		Inject:          injectConfig(), OnPodEvent: podEvents.record, PodStatusPort: statusPort, ClaimGrace: claimGrace,
	}, ctrl.Log)
	if err != nil {
		return nil, err
	}
	k8s = mgr.GetClient()
	operatorCache = mgr.GetCache()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("cache did not sync: %w", <-done)
	}
	// The API server calls the webhooks over TLS: wait until the server answers.
	deadline := time.Now().Add(30 * time.Second)
	for mgr.GetWebhookServer().StartedChecker()(nil) != nil {
		if time.Now().After(deadline) {
			cancel()
			return nil, fmt.Errorf("webhook server did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A direct client, so tests read what the API server has, not the cache.
	direct, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		cancel()
		return nil, err
	}
	k8s = direct
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "operator stopped: %v\n", err)
		}
	}, nil
}

func setupNamespaces() error {
	ctx := context.Background()
	for name, labels := range map[string]map[string]string{
		operatorNS: {fsv1.InjectionLabel: "enabled"}, // opted in, yet never injected
		optedInNS:  {fsv1.InjectionLabel: "enabled"},
		plainNS:    nil,
		baselineNS: {fsv1.InjectionLabel: "enabled", "pod-security.kubernetes.io/enforce": "baseline"},
	} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if err := k8s.Create(ctx, ns); err != nil {
			return err
		}
	}
	return k8s.Create(ctx, envtestNetwork())
}

// envtestNetwork is the suite's DataNetwork: the subnets of the samples and the tests' stacks,
// every address granted to every namespace (the samples' VIPs are outside the subnets), any VLAN
// they name and locally administered MACs from 02. The tests of the network's refusals make
// networks of their own.
func envtestNetwork() *fsv1.DataNetwork {
	return &fsv1.DataNetwork{ObjectMeta: metav1.ObjectMeta{Name: dataNetwork}, Spec: fsv1.DataNetworkSpec{
		Subnets: []string{"10.99.0.0/24", "10.56.0.0/24", "10.56.1.0/24", "10.56.2.0/24", "10.56.3.0/24", "10.98.0.0/24",
			"10.0.0.0/24", "10.0.1.0/24", "192.168.1.0/24", "192.168.2.0/24", "10.10.10.0/24", "10.10.20.0/24", "10.10.30.0/24",
			"2001:db8:56::/64", "2001:db8::/64"},
		VLANs:  []int32{10, 20, 30, 100},
		MAC:    &fsv1.MACPolicy{Policy: fsv1.MACPrefix, Prefix: "02"},
		Grants: []fsv1.AddressGrant{{NamespaceSelector: &metav1.LabelSelector{}, Ranges: []string{"0.0.0.0/0", "::/0"}}},
	}}
}
