// fstack-operator is kube-fstack's manager: the StackInstance controller, the StackInstance
// validating webhook and the Pod injection webhook, with leader election, health endpoints,
// metrics and its own webhook certificates.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
)

func main() {
	o, shutdownDelay, err := parseFlags()
	log := ctrl.Log.WithName("setup")
	if err == nil {
		o.Drain = &manager.Drain{}
		var mgr ctrl.Manager
		cfg := ctrl.GetConfigOrDie()
		cfg.QPS, cfg.Burst = o.QPS, o.Burst
		if mgr, err = manager.New(cfg, o, log); err == nil {
			log.Info("starting", "namespace", o.Namespace, "manageCerts", o.ManageCerts, "dataplaneImage", o.Inject.Image, "allowedDataplaneImages", o.Inject.AllowedImages)
			err = mgr.Start(manager.StopAfterDrain(context.Background(), ctrl.SetupSignalHandler(), o.Drain, shutdownDelay, log))
		}
	}
	if err != nil {
		log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

// newLogger is controller-runtime's logr over the handler every kube-fstack binary logs
// through (internal/logging), so the operator's lines look like the others'. logr's V(n) is
// slog level -n: --log-level=debug shows V(1) and below.
func newLogger(w io.Writer, o logging.Options) (logr.Logger, error) {
	h, err := logging.NewHandler(w, o)
	if err != nil {
		return logr.Discard(), err
	}
	return logr.FromSlogHandler(h.WithAttrs([]slog.Attr{slog.String(logging.KeyComponent, logging.ComponentOperator)})), nil
}

func parseFlags() (manager.Options, time.Duration, error) {
	o := manager.Options{Inject: inject.DefaultConfig()}
	var shutdownDelay time.Duration
	var pullPolicy, memory, allowedImages string
	var qps float64
	var burst int
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint (0 disables it).")
	flag.BoolVar(&o.MetricsInsecure, "metrics-insecure", false, "Serve metrics over plain HTTP without authentication (local debugging only); by default they are HTTPS, for callers allowed to get /metrics.")
	flag.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	flag.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect one active controller among replicas (every replica serves the webhooks).")
	flag.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "The operator's namespace (never injected; holds the certificate secret and the lease).")
	flag.StringVar(&o.WebhookHost, "webhook-host", "", "Address the webhook server listens on (all when empty).")
	flag.IntVar(&o.WebhookPort, "webhook-port", 9443, "Port of the webhook server.")
	flag.StringVar(&o.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory of the webhook serving certificate (tls.crt, tls.key).")
	flag.StringVar(&o.WebhookClientCA, "webhook-client-ca", "", "PEM file of the CA that signs the API server's webhook client certificate (its admission configuration's kubeconfig for this webhook); when set, the webhook server requires and verifies a client certificate from it.")
	flag.BoolVar(&o.ManageCerts, "manage-certs", true, "Generate and rotate the webhook certificate and inject its CA; false when cert-manager does it.")
	flag.StringVar(&o.Certs.SecretName, "cert-secret", "kube-fstack-webhook-cert", "Secret holding the webhook certificate.")
	flag.StringVar(&o.Certs.MetricsServiceName, "metrics-service", "", "The operator's metrics Service: when set, the webhook certificate names it too and the metrics endpoint serves that certificate (from --cert-dir), so scrapers can verify it against the operator's CA; empty: a self-signed certificate.")
	flag.StringVar(&o.Certs.ServiceName, "webhook-service", "kube-fstack-webhook", "Service in front of the webhook server (the certificate's DNS name).")
	flag.StringVar(&o.Certs.MutatingName, "mutating-webhook-configuration", "kube-fstack-injector", "MutatingWebhookConfiguration whose CA bundle the operator keeps.")
	flag.StringVar(&o.Certs.ValidatingName, "validating-webhook-configuration", "kube-fstack-validator", "ValidatingWebhookConfiguration whose CA bundle the operator keeps.")
	flag.StringVar(&o.Inject.Image, "dataplane-image", o.Inject.Image, "Dataplane image for StackInstances that name none.")
	flag.StringVar(&allowedImages, "allowed-dataplane-images", "", "Comma-separated registries and repository prefixes a StackInstance's spec.dataplane.image must be under (e.g. registry.example/kube-fstack/: that host exactly, then that path at a '/'); empty allows any; --dataplane-image is always allowed.")
	flag.StringVar(&pullPolicy, "dataplane-pull-policy", "IfNotPresent", "imagePullPolicy of the injected dataplane.")
	flag.StringVar(&o.Inject.HostSocketRoot, "vhost-socket-root", o.Inject.HostSocketRoot, "The CNI plugin's socket root on the nodes: in opted-in namespaces, no pod may mount a hostPath at, under or above it.")
	flag.BoolVar(&o.Inject.NodeAffinity, "node-affinity", o.Inject.NodeAffinity, "Require the node agent's labels (node.kubefstack.io/*) the stack needs in injected pods' node affinity; false where no node agent runs.")
	flag.StringVar(&o.Inject.DefaultDataNetwork, "default-data-network", "", "The DataNetwork of a StackInstance port that names none (spec.ports[].dataNetwork): the chart's dataNetwork.name. Empty: every port must name one.")
	flag.StringVar(&memory, "dataplane-memory", o.Inject.DataplaneMemory.String(), "Memory of the dataplane container when the StackInstance sets none.")
	flag.DurationVar(&shutdownDelay, "shutdown-delay", 0, "On SIGTERM, keep answering webhook calls this long, not ready and ending each connection after its answer, before stopping: long enough for the Service's endpoints and every node's proxy to stop sending this replica calls (the chart's operator.shutdownDelaySeconds).")
	flag.DurationVar(&o.ClaimGrace, "claim-grace", claims.DefaultGrace, "How long an AddressClaim no pod holds is kept before it is taken back: the longest an address is held by a forged AdmissionReview, or by an admission whose pod is not stored (a claim taken back from a pod stored later is made again while the address is free).")
	flag.IntVar(&o.Workers, "workers", 4, "StackInstances reconciled in parallel.")
	flag.Float64Var(&qps, "kube-api-qps", 100, "Requests per second to the API server (client-side limit).")
	flag.IntVar(&burst, "kube-api-burst", 200, "Burst of requests to the API server.")
	o.Inject.Logging.BindFlags(flag.CommandLine)
	flag.Parse()
	logger, err := newLogger(os.Stderr, o.Inject.Logging)
	if err != nil {
		// No logger to say it with yet.
		fmt.Fprintln(os.Stderr, "fstack-operator:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(logger)
	if o.Certs.MetricsServiceName != "" {
		o.MetricsCertDir = o.CertDir
	}
	o.Inject.ImagePullPolicy = corev1.PullPolicy(pullPolicy)
	o.Inject.AllowedImages = inject.ParseImagePrefixes(allowedImages)
	if err := inject.CheckImagePrefixes(o.Inject.AllowedImages); err != nil {
		return o, 0, err
	}
	if shutdownDelay < 0 {
		return o, 0, fmt.Errorf("--shutdown-delay %s: must not be negative", shutdownDelay)
	}
	mem, err := resource.ParseQuantity(memory)
	if err != nil {
		return o, 0, fmt.Errorf("--dataplane-memory: %w", err)
	}
	o.Inject.DataplaneMemory = mem
	o.QPS, o.Burst = float32(qps), burst
	return o, shutdownDelay, nil
}
