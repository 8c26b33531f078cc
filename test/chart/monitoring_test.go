package chart

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// TestMonitoringOffByDefault: without the Prometheus Operator's CRDs an install with the
// defaults must not render its kinds, nor bind anyone to the metrics reader.
func TestMonitoringOffByDefault(t *testing.T) {
	rendered := objects(t, render(t, "default"))
	for _, kind := range []string{"ServiceMonitor", "PodMonitor"} {
		if got := find(rendered, kind); len(got) != 0 {
			t.Errorf("the defaults render %d %s(s)", len(got), kind)
		}
	}
	for _, b := range find(rendered, "ClusterRoleBinding") {
		if strings.HasSuffix(b.GetName(), "-metrics-reader") {
			t.Errorf("the defaults bind someone to the metrics reader: %s", b.GetName())
		}
	}
}

// TestMonitorsSelectWhatServes: the ServiceMonitor selects the metrics Service (and its port by
// name), the PodMonitor the port the injector gives the dataplane; a renamed port or label on
// either side would leave Prometheus with no target and no error.
func TestMonitorsSelectWhatServes(t *testing.T) {
	for _, set := range []string{"monitoring", "monitoring-custom"} {
		rendered := objects(t, render(t, set))
		sm, pm := find(rendered, "ServiceMonitor"), find(rendered, "PodMonitor")
		if len(sm) != 1 || len(pm) != 1 {
			t.Fatalf("%s: %d ServiceMonitors and %d PodMonitors, want one each", set, len(sm), len(pm))
		}
		sel, _, _ := unstructured.NestedStringMap(sm[0].Object, "spec", "selector", "matchLabels")
		port := endpointPort(t, sm[0], "endpoints")
		found := false
		for _, svc := range find(rendered, "Service") {
			if !labels.SelectorFromSet(sel).Matches(labels.Set(svc.GetLabels())) {
				continue
			}
			ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
			for _, p := range ports {
				found = found || p.(map[string]any)["name"] == port
			}
		}
		if !found {
			t.Errorf("%s: no Service selected by the ServiceMonitor (%v) has a port named %q", set, sel, port)
		}
		if got := endpointPort(t, pm[0], "podMetricsEndpoints"); got != podcontract.MetricsPortName {
			t.Errorf("%s: the PodMonitor scrapes port %q, the injected dataplane's is %q", set, got, podcontract.MetricsPortName)
		}
	}
}

func endpointPort(t *testing.T, o *unstructured.Unstructured, field string) string {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(o.Object, "spec", field)
	if len(eps) != 1 {
		t.Fatalf("%s %s: %d %s, want 1", o.GetKind(), o.GetName(), len(eps), field)
	}
	port, _ := eps[0].(map[string]any)["port"].(string)
	return port
}

// TestMonitoringRefused: a ServiceMonitor of metrics the operator does not serve, and a bad
// interval, fail the install with the key named.
func TestMonitoringRefused(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"monitoring.serviceMonitor.enabled=true", "operator.metrics.enabled=false"}, "monitoring.serviceMonitor.enabled needs operator.metrics.enabled"},
		{[]string{"monitoring.podMonitor.interval=1.5s"}, "interval"},
		{[]string{"monitoring.podMonitor.port=9180"}, "port"},
		{[]string{"monitoring.prometheusServiceAccount.name=prometheus"}, "monitoring.prometheusServiceAccount.namespace"},
		{[]string{"monitoring.podMonitor.enabled=true"}, "monitoring.podMonitor.namespaces"},
	} {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		if _, stderr, err := helm(t, args...); err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("--set %v: want refused naming %q, got %v\n%s", tc.set, tc.want, err, stderr)
		}
	}
}
