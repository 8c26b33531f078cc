package webhook

import (
	"crypto/tls"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of the injection webhook: the values of kubefstack_injection_requests_total's result
// label. A graph of injections by result sums by it; the reason label says why.
const (
	resultInjected = "injected" // the pod got the dataplane
	resultSkipped  = "skipped"  // let through unchanged
	resultRefused  = "refused"  // denied with what to fix (the user's to act on)
	resultError    = "error"    // the webhook could not answer (the operator's to fix)
)

// injectionReasons are every reason each result is counted with: the series exist at 0 from
// the start, so rate() and increase() see the first request.
var injectionReasons = map[string][]string{
	resultInjected: {""},
	resultSkipped:  {"operator-namespace", "no-stack", "opt-out", "already-injected"},
	resultRefused:  {"stack-not-found", "stack-invalid", "pod-invalid"},
	resultError:    {"decode", "encode", "stack-read", "internal"},
}

var (
	injections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubefstack_injection_requests_total",
		Help: "Pod admission requests the injection webhook answered, by result (injected, skipped, refused, error) and reason.",
	}, []string{"result", "reason"})
	tlsHandshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubefstack_webhook_tls_handshakes_total",
		Help: "TLS handshakes the webhook server completed, by negotiated application protocol; it grows with requests when the API server does not reuse its connections.",
	}, []string{"protocol"})
)

// countInjection counts one answered request.
func countInjection(result, reason string) {
	injections.WithLabelValues(result, reason).Inc()
}

func init() {
	metrics.Registry.MustRegister(injections, tlsHandshakes)
	for result, reasons := range injectionReasons {
		for _, reason := range reasons {
			injections.WithLabelValues(result, reason)
		}
	}
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
