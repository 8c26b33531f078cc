// Package manager wires the operator's parts into one controller-runtime manager; the binary
// and the envtest suite build it the same way.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/operator/internal/certs"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
	"github.com/kube-fstack/kube-fstack/operator/internal/controller"
	"github.com/kube-fstack/kube-fstack/operator/internal/nodemetrics"
	fswebhook "github.com/kube-fstack/kube-fstack/operator/internal/webhook"
)

// Leader election reads and renews one Lease, and creates it first (a create cannot be limited
// to a name).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create,namespace=kube-fstack-system
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;update,resourceNames=kube-fstack-operator.kubefstack.io,namespace=kube-fstack-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=kube-fstack-system

// The metrics endpoint authenticates every scrape with a TokenReview and authorizes it with a
// SubjectAccessReview (get on the non-resource URL /metrics: the chart's metrics-reader role).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The admission checks read the platform's data networks; only the platform writes them.
// +kubebuilder:rbac:groups=kubefstack.io,resources=datanetworks,verbs=get;list;watch

// Options configure the manager.
type Options struct {
	MetricsAddr, ProbeAddr string
	// MetricsInsecure serves metrics over plain HTTP to anyone: only for local debugging.
	MetricsInsecure bool
	LeaderElect     bool
	// MetricsCertDir, when set, holds the metrics endpoint's certificate (tls.crt, tls.key):
	// the webhook's, issued by the operator's CA (or cert-manager's) and naming the metrics
	// Service, so Prometheus can verify it. Empty: a self-signed one, made at start.
	MetricsCertDir string
	// Namespace is the operator's own: never injected; holds the certificate secret and lease.
	Namespace   string
	WebhookHost string
	WebhookPort int
	CertDir     string
	// WebhookClientCA, when set, is a PEM file of the CA that signs the API server's webhook
	// client certificate: the webhook server then requires and verifies one.
	WebhookClientCA string
	// ManageCerts makes the operator generate, rotate and inject its webhook certificate.
	ManageCerts bool
	Certs       certs.Options
	Inject      inject.Config
	// ClaimGrace is how long an AddressClaim no pod holds is kept (--claim-grace); zero is
	// claims.DefaultGrace.
	ClaimGrace time.Duration
	// Workers reconcile StackInstances in parallel.
	Workers int
	// QPS and Burst limit the client's requests to the API server.
	QPS   float32
	Burst int
	// OnPodEvent is the controller's test hook: it sees every pod event that enqueues a
	// StackInstance.
	OnPodEvent func(pod client.Object)
	// PodStatusPort is where the operator reads a bound pod's /status on its readiness
	// transitions; 0 is podcontract.SupervisorPort (a test serves a stand-in elsewhere).
	PodStatusPort int
	// SecondInProcess lets a test run another manager beside the first (controller names are
	// otherwise unique per process).
	SecondInProcess bool
	// Drain, once started, fails readiness and has every webhook answer end its connection
	// (see Drain); nil: a drain of the manager's own that nothing starts.
	Drain *Drain
}

// Scheme has the core types and StackInstance.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = fsv1.AddToScheme(s)
	return s
}

// New builds the manager with the controller, the webhooks, health checks and, when asked,
// certificate rotation.
func New(cfg *rest.Config, o Options, log logr.Logger) (ctrl.Manager, error) {
	if o.Namespace == "" {
		return nil, fmt.Errorf("the operator's namespace must be set (--namespace or POD_NAMESPACE)")
	}
	if o.Drain == nil {
		o.Drain = &Drain{}
	}
	tlsOpts, err := webhookTLS(o)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrlOptions(o, tlsOpts))
	if err != nil {
		return nil, err
	}
	ready := make(chan struct{}) // closed by the rotator once the certificate is on disk
	if o.ManageCerts {
		if err := setupCerts(cfg, mgr, &o, ready); err != nil {
			return nil, err
		}
	}
	if err := setupControllers(mgr, o); err != nil {
		return nil, err
	}
	if err := serveWebhooks(mgr, o, ready, log); err != nil {
		return nil, err
	}
	return mgr, nil
}

// webhookTLS is the webhook server's TLS options: handshakes counted, and the API server's
// client certificate required when a CA for it is given.
func webhookTLS(o Options) ([]func(*tls.Config), error) {
	tlsOpts := []func(*tls.Config){fswebhook.CountHandshakes}
	if o.WebhookClientCA != "" {
		require, err := certs.RequireClientCerts(o.WebhookClientCA)
		if err != nil {
			return nil, err
		}
		tlsOpts = append(tlsOpts, require)
	}
	return tlsOpts, nil
}

// setupCerts makes the webhook's certificate Secret now (with a client of its own: the
// manager's cache does not run yet) and adds the rotator, which closes ready once the
// certificate is on disk.
func setupCerts(cfg *rest.Config, mgr ctrl.Manager, o *Options, ready chan struct{}) error {
	o.Certs.Namespace, o.Certs.CertDir = o.Namespace, o.CertDir
	direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	if err := certs.EnsureSecret(context.Background(), direct, o.Certs); err != nil {
		return err
	}
	return certs.AddRotator(mgr, o.Certs, ready)
}

// setupControllers adds the controllers, the node metrics and the health and drain checks.
func setupControllers(mgr ctrl.Manager, o Options) error {
	rec := &controller.StackInstanceReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("kube-fstack"), Workers: o.Workers, OnPodEvent: o.OnPodEvent}
	if err := rec.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := controller.IndexClaimsAndPods(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	endpoints := &controller.EndpointSliceReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("kube-fstack"), Namespace: o.Namespace}
	if err := endpoints.SetupWithManager(context.Background(), mgr); err != nil {
		return err
	}
	instance, _ := os.Hostname() // the pod's name, as the recorder names its replica
	health := &controller.PodHealthReconciler{Reader: mgr.GetClient(), Writer: mgr.GetClient(), Instance: "kube-fstack-" + instance,
		Port: o.PodStatusPort}
	if err := health.SetupWithManager(mgr); err != nil {
		return err
	}
	explain := &controller.UnschedulableReconciler{Cache: mgr.GetCache(), Live: mgr.GetAPIReader(), Writer: mgr.GetClient(),
		Instance: "kube-fstack-" + instance}
	if err := explain.SetupWithManager(mgr); err != nil {
		return err
	}
	addrs := &controller.AddressClaimReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kube-fstack"),
		Namespace: o.Namespace, Inject: o.Inject, Grace: o.ClaimGrace}
	if err := addrs.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := nodemetrics.Register(context.Background(), mgr.GetCache(), metrics.Registry); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("drain", o.Drain.ready)
}

// serveWebhooks registers the webhooks, at once or, with managed certificates, once ready is
// closed. The webhook server must not start before its certificate is on disk: the manager
// starts it before the caches the certificate rotator needs, so it is added (by
// GetWebhookServer) only once the certificate exists, and readiness waits for it.
func serveWebhooks(mgr ctrl.Manager, o Options, ready <-chan struct{}, log logr.Logger) error {
	var served atomic.Bool
	if err := mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		if !served.Load() {
			return errors.New("the webhook certificate is not ready yet")
		}
		return mgr.GetWebhookServer().StartedChecker()(req)
	}); err != nil {
		return err
	}
	if !o.ManageCerts {
		if err := registerWebhooks(mgr, o); err != nil {
			return err
		}
		served.Store(true)
		return nil
	}
	go func() {
		<-ready
		if err := registerWebhooks(mgr, o); err != nil {
			log.Error(err, "register webhooks")
			return
		}
		served.Store(true)
	}()
	return nil
}

func registerWebhooks(mgr ctrl.Manager, o Options) error {
	networks := &fswebhook.NetworkChecker{Reader: mgr.GetCache(), Live: mgr.GetAPIReader(), Default: o.Inject.DefaultDataNetwork}
	if err := (&fswebhook.StackInstanceValidator{Images: o.Inject, Networks: networks}).SetupWithManager(mgr); err != nil {
		return err
	}
	injector := fswebhook.NewPodInjector(mgr.GetCache(), mgr.GetAPIReader(), admission.NewDecoder(mgr.GetScheme()), o.Inject, o.Namespace)
	injector.Networks = networks
	injector.Claims = &claims.Claimer{Writer: mgr.GetClient(), Cached: mgr.GetCache(), Live: mgr.GetAPIReader(), Namespace: o.Namespace, Grace: o.ClaimGrace}
	mgr.GetWebhookServer().Register(fswebhook.InjectPath, &webhook.Admission{Handler: injector})
	updates := &fswebhook.PodUpdateValidator{Config: o.Inject, OwnNamespace: o.Namespace, Decoder: admission.NewDecoder(mgr.GetScheme())}
	mgr.GetWebhookServer().Register(fswebhook.PodUpdatePath, &webhook.Admission{Handler: updates})
	return nil
}

func ctrlOptions(o Options, webhookTLS []func(*tls.Config)) ctrl.Options {
	hasStack, _ := labels.NewRequirement(fsv1.StackLabel, selection.Exists, nil)
	return ctrl.Options{
		Controller:              ctrlconfig.Controller{SkipNameValidation: &o.SecondInProcess},
		Scheme:                  Scheme(),
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "kube-fstack-operator.kubefstack.io",
		LeaderElectionNamespace: o.Namespace,
		WebhookServer: drainingServer{Server: webhook.NewServer(webhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.CertDir,
			TLSOpts: webhookTLS}), drain: o.Drain},
		Cache: cacheOptions(o, hasStack),
	}
}

// cacheOptions: only the pods and ConfigMaps that concern a StackInstance are cached, each
// trimmed to what the controllers read (a tenant writes its pods' and ConfigMaps' labels and
// annotations, so selecting by label bounds how many, trimming how large): the operator's memory
// stays flat however many other pods the cluster runs and whatever its tenants write. Secrets:
// only the webhook certificate's, should anything read one through this cache.
func cacheOptions(o Options, hasStack *labels.Requirement) cache.Options {
	byObject := map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.NewSelector().Add(*hasStack), Transform: controller.TrimPod},
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{controller.ManagedByLabel: controller.ManagedBy}),
			Transform: controller.TrimConfigMap},
	}
	// The Services and EndpointSlices of the Services that reach F-Stack: see EndpointSliceCache.
	for obj, by := range controller.EndpointSliceCache() {
		byObject[obj] = by
	}
	if o.Certs.SecretName != "" {
		byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{o.Namespace: {}},
			Field: fields.OneTermEqualSelector("metadata.name", o.Certs.SecretName)}
	}
	return cache.Options{ByObject: byObject}
}

// metricsOptions serves metrics over HTTPS (the webhook's certificate when MetricsCertDir is
// set, else a self-signed one controller-runtime makes) to callers the API server authenticates
// and allows to get /metrics, as controller-runtime recommends; HTTP/2 is off there, as in kubebuilder's layout (its stream resets are a known
// denial-of-service vector and Prometheus does not need it).
func metricsOptions(o Options) metricsserver.Options {
	if o.MetricsInsecure {
		return metricsserver.Options{BindAddress: o.MetricsAddr}
	}
	opts := []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	if o.MetricsCertDir != "" {
		served := &certs.Served{Dir: o.MetricsCertDir}
		opts = append(opts, func(c *tls.Config) { c.GetCertificate = served.GetCertificate })
	}
	return metricsserver.Options{
		BindAddress:    o.MetricsAddr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		TLSOpts:        opts,
	}
}
