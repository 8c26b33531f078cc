package webhook

import (
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
)

func init() {
	metrics.Registry.MustRegister(injectRequests, injectInjected, injectSkipped, injectFailed)
}
