package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fstackv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// checkPrometheus: Prometheus scrapes the operator (HTTPS, a token of a ServiceAccount bound to
// the chart's metrics-reader) and the injected pod's dataplane, and serves the series a user
// graphs: injections by result, the stack's processes up and restarts, NIC packets growing
// while the test pings; then the chart's alerts, loaded and evaluated, and every query of its
// dashboard answered.
func checkPrometheus(t *testing.T, pod *corev1.Pod) {
	prom := startPrometheus(t, prometheusToken(t))
	stack := fmt.Sprintf(`stack=%q`, stackName)
	prom.wait(t, "the operator's and the pod's dataplane targets up", func(v map[string]float64) bool {
		return v[`job="kube-fstack-operator",namespace="`+env.Namespace+`"`] >= 1 &&
			v[`job="kube-fstack-dataplane",namespace="`+injectedNS+`"`] == 1
	}, `sum by (job, namespace) (up == 1)`, "job", "namespace")
	prom.wait(t, "the dataplane target is the app pod's", func(v map[string]float64) bool { return v[pod.Name] == 1 },
		`up{job="kube-fstack-dataplane",`+stack+`}`, "pod")

	// Each operator replica counts the reviews it answered: the API server spreads them over
	// the replicas, so only the sum over replicas counts them all.
	refused := `sum(kubefstack_injection_requests_total{result="refused",reason="stack-not-found"})`
	before := prom.value(t, refused)
	refusedPod := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: e2e-prom-refused, namespace: %s, labels: {%s: e2e-no-such-stack}}\n"+
		"spec:\n  containers:\n  - {name: app, image: localhost/nginx:1.22, command: [nginx]}\n", injectedNS, fstackv1.StackLabel)
	out, err := env.KubectlIn([]byte(refusedPod), "apply", "-f", "-")
	if err == nil || !strings.Contains(out, "not found") {
		t.Fatalf("a pod naming a missing StackInstance was not refused: %v\n%s", err, out)
	}
	prom.wait(t, "injections by result: one more refused for a missing stack, the app pod's injection counted", func(v map[string]float64) bool {
		return v[`result="refused",reason="stack-not-found"`] > before && v[`result="injected",reason=""`] >= 1
	}, `sum by (result, reason) (kubefstack_injection_requests_total)`, "result", "reason")

	got := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, got); err != nil {
		t.Fatal(err)
	}
	// The dataplane restarts in place: its restarts are generation-1 summed over the reasons
	// (the kill -9 steps made three process_exit ones), whatever the kubelet counts.
	st := mustStatus(t, got)
	restarts := float64(st.Generation - 1)
	if st.Restarts.Dataplane.ByReason[podcontract.DataplaneRestartProcessExit] < 3 {
		t.Fatalf("the dataplane of %s has not restarted in place three times (%+v): this step follows the kill -9 steps", pod.Name, st.Restarts.Dataplane)
	}
	prom.wait(t, fmt.Sprintf("the stack's processes all up, and %v dataplane restart(s), at least 3 for a process exit", restarts), func(v map[string]float64) bool {
		return v["up"] == 1 && v["expected"] == 1 && v["restarts"] == restarts && v["process_exit"] >= 3
	}, `label_replace(fstack_processes_up{`+stack+`}, "m", "up", "", "") or label_replace(fstack_processes_expected{`+stack+`}, "m", "expected", "", "")`+
		` or label_replace(sum(fstack_dataplane_restarts_total{`+stack+`}), "m", "restarts", "", "")`+
		` or label_replace(sum(fstack_dataplane_restarts_total{`+stack+`,reason="process_exit"}), "m", "process_exit", "", "")`, "m")

	checkNICGrowsWhilePinging(t, prom, stack, servedAddr(t, got))
	checkAlertRules(t, prom, pod)
	checkDashboardQueries(t, prom, pod)
}

// checkNICGrowsWhilePinging pings the stack from a peer on the bridge until Prometheus's NIC
// counters of the pod have grown by at least one burst each way.
func checkNICGrowsWhilePinging(t *testing.T, prom *prometheus, stack, addr string) {
	series := `label_replace(fstack_nic_rx_packets_total{` + stack + `,port="0"}, "d", "rx", "", "") or label_replace(fstack_nic_tx_packets_total{` + stack + `,port="0"}, "d", "tx", "", "")`
	base := prom.vector(t, series, "d")
	if _, ok := base["rx"]; !ok {
		t.Fatalf("Prometheus has no NIC counters of the stack yet: %v", base)
	}
	peer, err := nodetest.AttachPeer(env.Vsctl, env.OVSNetns, env.OVSBridge, "e2e-prom-peer", "e2em", peerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	prom.wait(t, "NIC rx and tx packets grown by a burst of pings", func(v map[string]float64) bool {
		if _, err := peer.Ping(addr, 1); err != nil {
			t.Logf("ping: %v", err)
		}
		return v["rx"] >= base["rx"]+3 && v["tx"] >= base["tx"]+3
	}, series, "d")
	t.Logf("NIC packets before the pings %v, Prometheus now has %v", base, prom.vector(t, series, "d"))
}

// prometheusToken is a token of a ServiceAccount bound to the chart's metrics-reader
// ClusterRole (get on /metrics), what Prometheus's own ServiceAccount needs to scrape the
// operator.
func prometheusToken(t *testing.T) string {
	t.Helper()
	_, reader := metricsEndpoint(t)
	doc := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: e2e-prometheus-scraper, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-prometheus-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[2]s}
subjects: [{kind: ServiceAccount, name: e2e-prometheus-scraper, namespace: %[1]s}]
`, plainNS, reader)
	mustApply(t, doc)
	t.Cleanup(func() {
		_, _ = env.KubectlIn([]byte(doc), "delete", "--ignore-not-found", "-f", "-")
	})
	out, err := env.KubectlStdout("create", "token", "-n", plainNS, "e2e-prometheus-scraper", "--duration=1h")
	if err != nil {
		t.Fatalf("a token for Prometheus: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}
