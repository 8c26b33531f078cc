package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// nginxSample is config/samples/local-cluster/nginx.yaml (Nginx with an httpGet readiness and a
// tcpSocket liveness probe on port 80) moved to the suite's namespace and StackInstance.
const nginxSampleApp = "nginx-fstack"

func nginxSample(t *testing.T) string {
	t.Helper()
	raw := fixtures.MustRead(t, "samples/local-cluster/nginx.yaml")
	doc := strings.ReplaceAll(string(raw), "namespace: fstack-demo", "namespace: "+injectedNS)
	doc = strings.ReplaceAll(doc, "kubefstack.io/stack: local-vhost", "kubefstack.io/stack: "+stackName)
	// One replica: the suite's stack gives its dataplane the node's one exclusive CPU.
	doc = strings.Replace(doc, "  replicas: 2\n", "  replicas: 1\n  strategy: {type: Recreate}\n", 1)
	// The sample's stack shares CPUs (cpuPolicy Shared, a Burstable app); the suite's stack gives
	// the dataplane an exclusive CPU, which needs the pod Guaranteed: requests equal to limits.
	doc = strings.Replace(doc, "requests: {cpu: 200m, memory: 128Mi}", "requests: {cpu: 500m, memory: 128Mi}", 1)
	doc = strings.Replace(doc, "limits: {memory: 128Mi}", "limits: {cpu: 500m, memory: 128Mi}", 1)
	if env.Networks != "" {
		doc = strings.Replace(doc, "        app: nginx-fstack\n", fmt.Sprintf("        app: nginx-fstack\n      annotations: {k8s.v1.cni.cncf.io/networks: %q}\n", env.Networks), 1)
	}
	if !strings.Contains(doc, "namespace: "+injectedNS) || !strings.Contains(doc, "kubefstack.io/stack: "+stackName) || !strings.Contains(doc, "  replicas: 1\n") ||
		!strings.Contains(doc, "requests: {cpu: 500m, memory: 128Mi}") || !strings.Contains(doc, "limits: {cpu: 500m, memory: 128Mi}") {
		t.Fatalf("the sample's namespace, stack label, replicas or resources moved; this test rewrites them:\n%s", doc)
	}
	return doc
}

// waitNginxReady waits for the sample's pod to be Ready: only the rewritten probes can make it so.
func waitNginxReady(t *testing.T) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	err := framework.Poll("the "+nginxSampleApp+" pod Ready", 3*time.Minute, time.Second, func() (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(context.Background(), pods, client.InNamespace(injectedNS), client.MatchingLabels{"app": nginxSampleApp}); err != nil {
			return false, err.Error(), nil
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.DeletionTimestamp == nil && framework.PodReady(p) {
				got = p
				return true, "", nil
			}
		}
		var seen []string
		for i := range pods.Items {
			seen = append(seen, framework.PodSummary(&pods.Items[i]))
		}
		return false, strings.Join(seen, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkProbesRewritten: the nginx container's probes point at the supervisor, the annotation and
// the dataplane's environment hold them as the sample wrote them.
func checkProbesRewritten(t *testing.T, p *corev1.Pod) {
	t.Helper()
	c := container(p, "nginx")
	for kind, probe := range map[string]*corev1.Probe{podcontract.ProbeReadiness: c.ReadinessProbe, podcontract.ProbeLiveness: c.LivenessProbe} {
		want := podcontract.AppProbePath("nginx", kind)
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.IntValue() != podcontract.SupervisorPort || probe.HTTPGet.Path != want {
			t.Fatalf("nginx %s probe %+v, want httpGet %d %s", kind, probe, podcontract.SupervisorPort, want)
		}
	}
	if c.ReadinessProbe.PeriodSeconds != 2 || c.LivenessProbe.PeriodSeconds != 10 {
		t.Fatalf("the sample's periods were not kept: readiness %d, liveness %d", c.ReadinessProbe.PeriodSeconds, c.LivenessProbe.PeriodSeconds)
	}
	var shown map[string]map[string]struct {
		Original corev1.Probe `json:"original"`
		Path     string       `json:"path"`
	}
	if err := json.Unmarshal([]byte(p.Annotations[podcontract.AppProbesAnnotation]), &shown); err != nil {
		t.Fatalf("annotation %s: %v", podcontract.AppProbesAnnotation, err)
	}
	r, l := shown["nginx"]["readinessProbe"].Original, shown["nginx"]["livenessProbe"].Original
	if r.HTTPGet == nil || r.HTTPGet.Port.String() != "http" || l.TCPSocket == nil || l.TCPSocket.Port.IntValue() != 80 {
		t.Fatalf("annotation does not show the sample's probes: %s", p.Annotations[podcontract.AppProbesAnnotation])
	}
	dp := container(p, podcontract.DataplaneContainer)
	var probes podcontract.AppProbes
	for _, e := range dp.Env {
		if e.Name == podcontract.EnvAppProbes {
			probes, _ = podcontract.ParseAppProbes(e.Value)
		}
	}
	if got := probes[podcontract.AppProbePath("nginx", podcontract.ProbeReadiness)]; got.Port != 80 || got.HTTPGet == nil {
		t.Fatalf("the dataplane's %s does not carry the readiness probe on port 80: %v", podcontract.EnvAppProbes, probes)
	}
}

// checkNoListenerOnPodIP: like real F-Stack, the stand-in leaves Nginx no listener on the pod IP,
// so the kubelet's own probe of port 80 would be refused and the pod would never be Ready,
// while the supervisor on the same IP passes the rewritten one through the probe agent.
func checkNoListenerOnPodIP(t *testing.T, p *corev1.Pod) {
	t.Helper()
	ip := p.Status.PodIP
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "80"), 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("Nginx answers on the pod IP %s:80: the stand-in shim must leave it no kernel listener there, as F-Stack does", ip)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialing %s:80: %v, want connection refused", ip, err)
	}
	url := fmt.Sprintf("http://%s/%s", net.JoinHostPort(ip, fmt.Sprint(podcontract.SupervisorPort)),
		strings.TrimPrefix(podcontract.AppProbePath("nginx", podcontract.ProbeReadiness), "/"))
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("the supervisor's app probe: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "HTTP 200") {
		t.Fatalf("GET %s = %d %q, want 200 with Nginx's HTTP 200", url, resp.StatusCode, body)
	}
	t.Logf("%s:80 refused from the node; %s: %s", ip, url, strings.TrimSpace(string(body)))
	logs, err := env.Kubectl("logs", "-n", p.Namespace, p.Name, "-c", "nginx")
	if err != nil || !strings.Contains(logs, "moved to 127.0.0.1") {
		t.Fatalf("the nginx container's log does not show the stand-in moving its listener (%v):\n%s", err, logs)
	}
	dpLogs, _ := env.Kubectl("logs", "-n", p.Namespace, p.Name, "-c", podcontract.DataplaneContainer)
	if !strings.Contains(logtest.Readable(dpLogs), "probe agent started") {
		t.Fatalf("the dataplane log does not show the probe agent starting:\n%s", dpLogs)
	}
	checkPodIdentityInLog(t, p, dpLogs)
}

// checkPodIdentityInLog: every supervisor line names the pod and its stack, read from the
// downward-API volume as the real kubelet lays it out (each file a link through ..data).
func checkPodIdentityInLog(t *testing.T, p *corev1.Pod, logs string) {
	t.Helper()
	lines, err := logtest.Parse(logs, logging.FormatText, logging.ComponentSupervisor)
	if err != nil {
		t.Fatalf("the dataplane log is not the supervisor's structured log: %v\n%s", err, logs)
	}
	want := map[string]string{logging.KeyNamespace: p.Namespace, logging.KeyPod: p.Name, logging.KeyStack: p.Labels[fsv1.StackLabel]}
	for _, l := range lines {
		for k, v := range want {
			if l[k] != v {
				t.Fatalf("a dataplane log line has %s=%q, want %q (the pod's downward-API files): %v", k, l[k], v, l)
			}
		}
	}
}

// checkNoProbeFailedAtStart (issue 40 §3): the app's probes pass from the first one, since the
// supervisor is ready only once the probe agent is attached; a new pod's kubelet records no
// Unhealthy event (a failed probe) from its creation until two liveness periods after Ready,
// so at least one liveness probe ran on the ready pod.
func checkNoProbeFailedAtStart(t *testing.T, p *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	var readyAt time.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			readyAt = c.LastTransitionTime.Time
		}
	}
	live := container(p, "nginx").LivenessProbe
	if readyAt.IsZero() || live == nil || live.PeriodSeconds <= 0 {
		t.Fatalf("pod %s: Ready since %v, liveness probe %+v", p.Name, readyAt, live)
	}
	// The Ready condition's time has a second's precision: one more covers it.
	time.Sleep(time.Until(readyAt.Add(time.Duration(2*live.PeriodSeconds+1) * time.Second)))
	evs, err := env.Clientset.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID)})
	if err != nil {
		t.Fatal(err)
	}
	var failed, seen []string
	for _, e := range evs.Items {
		line := fmt.Sprintf("%s %s (x%d, last %s): %s", e.Type, e.Reason, max(e.Count, 1), e.LastTimestamp.UTC().Format(time.RFC3339), e.Message)
		seen = append(seen, line)
		if e.Reason == "Unhealthy" {
			failed = append(failed, line)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("pod %s (Ready at %s) had failed probes: %q\nits events: %q", p.Name, readyAt.UTC().Format(time.RFC3339), failed, seen)
	}
	if len(seen) == 0 {
		t.Fatalf("pod %s has no events at all: the list cannot show a probe's failure", p.Name)
	}
}

func deleteNginxSample(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if _, err := env.Kubectl("delete", "deployment", nginxSampleApp, "-n", injectedNS, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl("delete", "service", nginxSampleApp, "-n", injectedNS, "--ignore-not-found"); err != nil {
		t.Fatal(err)
	}
	waitPodResourcesGone(t, p)
}
