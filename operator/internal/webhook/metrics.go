package webhook

import (
	"crypto/tls"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Injection counters, served with controller-runtime's metrics.
var (
	injectRequests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubefstack_injection_requests_total",
		Help: "Pod admission requests the injection webhook received.",
	})
	injectInjected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubefstack_injection_injected_total",
		Help: "Pods the webhook injected with an F-Stack dataplane.",
	})
	injectSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubefstack_injection_skipped_total",
		Help: "Pods the webhook let through unchanged, by reason.",
	}, []string{"reason"})
	injectFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubefstack_injection_failed_total",
		Help: "Pods the webhook refused or could not process, by reason.",
	}, []string{"reason"})
	tlsHandshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubefstack_webhook_tls_handshakes_total",
		Help: "TLS handshakes the webhook server completed, by negotiated application protocol; it grows with requests when the API server does not reuse its connections.",
	}, []string{"protocol"})
)

func init() {
	metrics.Registry.MustRegister(injectRequests, injectInjected, injectSkipped, injectFailed, tlsHandshakes)
}

// CountHandshakes makes the webhook server's TLS config count every handshake it completes
// (resumed ones included). It is a webhook.Options TLSOpts function.
func CountHandshakes(cfg *tls.Config) {
	next := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if next != nil {
			if err := next(cs); err != nil {
				return err
			}
		}
		protocol := cs.NegotiatedProtocol
		if protocol == "" {
			protocol = "none"
		}
		tlsHandshakes.WithLabelValues(protocol).Inc()
		return nil
	}
}
