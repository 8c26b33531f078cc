package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fstackv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// prometheus is a real Prometheus (Debian's package) the test runs on the node: its own data
// directory, 127.0.0.1 only, the targets the chart's monitors select (writeConfig).
type prometheus struct {
	dir  string
	addr string
	cmd  *exec.Cmd
	done chan error
}

// startPrometheus writes the configuration and starts Prometheus; it is stopped and its
// directory removed when the test ends (its log and targets are printed first on failure).
func startPrometheus(t *testing.T, token string) *prometheus {
	t.Helper()
	bin := os.Getenv("E2E_PROMETHEUS")
	if bin == "" {
		bin = "prometheus"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("no Prometheus (%v): install Debian's package with hack/install-deps.sh --cluster, or set E2E_PROMETHEUS", err)
	}
	p := &prometheus{dir: t.TempDir(), addr: freeLoopbackAddr(t), done: make(chan error, 1)}
	cfg := p.writeConfig(t, token)
	log, err := os.Create(filepath.Join(p.dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(path, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(p.dir, "data"),
		"--web.listen-address="+p.addr, "--storage.tsdb.retention.time=1h")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(t); _ = log.Close() })
	err = framework.Poll("Prometheus ready on "+p.addr, 2*time.Minute, time.Second, func() (bool, string, error) {
		select {
		case err := <-p.done:
			p.done <- err
			return false, "", fmt.Errorf("prometheus exited: %w", err)
		default:
		}
		code, _, err := p.get("/-/ready")
		return code == http.StatusOK, fmt.Sprint(code, err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stop ends Prometheus with SIGTERM (SIGKILL after 30 s); on failure it prints its log tail and
// what it thought of its targets.
func (p *prometheus) stop(t *testing.T) {
	if t.Failed() {
		if _, body, err := p.get("/api/v1/targets"); err == nil {
			t.Logf("Prometheus targets:\n%.4000s", body)
		}
		if b, err := os.ReadFile(filepath.Join(p.dir, "prometheus.log")); err == nil {
			t.Logf("Prometheus log (tail):\n%s", tail(string(b), 40))
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Logf("Prometheus stopped: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Logf("Prometheus killed after 30 s of SIGTERM: %v", <-p.done)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (p *prometheus) get(path string) (int, string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + p.addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// vector runs an instant query and returns each sample keyed by the given labels
// (`a="x",b="y"`; a single label by its value alone).
func (p *prometheus) vector(t *testing.T, query string, keys ...string) map[string]float64 {
	t.Helper()
	v, err := p.query(query, keys)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (p *prometheus) value(t *testing.T, query string) float64 {
	t.Helper()
	return p.vector(t, query)[""]
}

func (p *prometheus) query(query string, keys []string) (map[string]float64, error) {
	code, body, err := p.get("/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", query, err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("query %s: HTTP %d: %.300s", query, code, body)
	}
	var r struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, fmt.Errorf("query %s: %w", query, err)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%q", k, s.Metric[k]))
		}
		key := strings.Join(parts, ",")
		if len(keys) == 1 {
			key = s.Metric[keys[0]]
		}
		str, _ := s.Value[1].(string)
		out[key], _ = strconv.ParseFloat(str, 64)
	}
	return out, nil
}

// wait polls a query until ok accepts its samples (keyed as vector keys them).
func (p *prometheus) wait(t *testing.T, what string, ok func(map[string]float64) bool, query string, keys ...string) {
	t.Helper()
	var last map[string]float64
	err := framework.Poll(what, 3*time.Minute, 2*time.Second, func() (bool, string, error) {
		v, err := p.query(query, keys)
		if err != nil {
			return false, err.Error(), nil
		}
		last = v
		return ok(v), fmt.Sprint(v), nil
	})
	if err != nil {
		t.Fatalf("%v\nquery: %s", err, query)
	}
	t.Logf("%s: %v", what, last)
}

// writeConfig writes prometheus.yml and the targets: Debian's Prometheus is built without
// Kubernetes discovery (kubernetes_sd_configs is not a field it knows), so the test discovers
// what the chart's ServiceMonitor and PodMonitor select (discoverTargets) and hands the targets
// to Prometheus as file_sd files. The operator's job scrapes as the ServiceMonitor says: HTTPS,
// the certificate verified against ca.crt of the certificate Secret for the metrics Service's
// name, the bearer token.
func (p *prometheus) writeConfig(t *testing.T, token string) string {
	t.Helper()
	tokenFile, caFile := filepath.Join(p.dir, "token"), filepath.Join(p.dir, "ca.crt")
	mustWrite(t, tokenFile, []byte(token))
	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: env.Namespace, Name: env.Release + "-webhook-cert"}, secret); err != nil {
		t.Fatalf("the operator's certificate Secret: %v", err)
	}
	mustWrite(t, caFile, secret.Data["ca.crt"])
	operator, dataplanes := discoverTargets(t)
	opFile, dpFile := filepath.Join(p.dir, "operator.json"), filepath.Join(p.dir, "dataplane.json")
	mustWriteJSON(t, opFile, operator)
	mustWriteJSON(t, dpFile, dataplanes)
	// The chart's alerts, as the chart ships them, evaluated as often as targets are scraped.
	cfg := fmt.Sprintf(`global: {scrape_interval: 2s, scrape_timeout: 2s, evaluation_interval: 2s}
rule_files: [%s]
scrape_configs:
- job_name: kube-fstack-operator
  scheme: https
  tls_config: {ca_file: %s, server_name: %s-metrics.%s.svc}
  authorization: {credentials_file: %s}
  file_sd_configs: [{files: [%s]}]
- job_name: kube-fstack-dataplane
  file_sd_configs: [{files: [%s]}]
`, chartAlerts(t), caFile, env.Release, env.Namespace, tokenFile, opFile, dpFile)
	path := filepath.Join(p.dir, "prometheus.yml")
	mustWrite(t, path, []byte(cfg))
	return path
}

// target is one entry of a file_sd file.
type target struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// discoverTargets selects as the chart's monitors do. ServiceMonitor: the ready endpoints, on
// the port https-metrics, of the release's operator Services in its namespace. PodMonitor: pods
// with the stack label in the namespaces it lists (the opted-in ones), on the container port
// (init containers included: the dataplane is a native sidecar) podcontract.MetricsPortName,
// labelled with their stack and node.
func discoverTargets(t *testing.T) (operator, dataplanes []target) {
	t.Helper()
	ctx := context.Background()
	svcs := &corev1.ServiceList{}
	sel := client.MatchingLabels{"app.kubernetes.io/instance": env.Release, "app.kubernetes.io/component": "operator"}
	if err := env.Client.List(ctx, svcs, client.InNamespace(env.Namespace), sel); err != nil {
		t.Fatal(err)
	}
	for _, svc := range svcs.Items {
		eps := &discoveryv1.EndpointSliceList{}
		if err := env.Client.List(ctx, eps, client.InNamespace(env.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
			t.Fatal(err)
		}
		for _, es := range eps.Items {
			operator = append(operator, sliceTargets(&es, "https-metrics")...)
		}
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.HasLabels{fstackv1.StackLabel}); err != nil {
		t.Fatal(err)
	}
	nss := &corev1.NamespaceList{}
	if err := env.Client.List(ctx, nss, client.MatchingLabels{fstackv1.InjectionLabel: "enabled"}); err != nil {
		t.Fatal(err)
	}
	optedIn := map[string]bool{}
	for _, ns := range nss.Items {
		optedIn[ns.Name] = true
	}
	for _, pod := range pods.Items {
		if !optedIn[pod.Namespace] {
			continue
		}
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			for _, port := range c.Ports {
				if port.Name == podcontract.MetricsPortName && pod.Status.PodIP != "" {
					dataplanes = append(dataplanes, target{Targets: []string{net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port.ContainerPort)))},
						Labels: map[string]string{"namespace": pod.Namespace, "pod": pod.Name, "stack": pod.Labels[fstackv1.StackLabel], "node": pod.Spec.NodeName}})
				}
			}
		}
	}
	if len(operator) == 0 || len(dataplanes) == 0 {
		t.Fatalf("discovered %d operator and %d dataplane targets, want some of each", len(operator), len(dataplanes))
	}
	return operator, dataplanes
}

func sliceTargets(es *discoveryv1.EndpointSlice, portName string) []target {
	var out []target
	for _, port := range es.Ports {
		if port.Name == nil || *port.Name != portName || port.Port == nil {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			labels := map[string]string{"namespace": es.Namespace}
			if ep.TargetRef != nil {
				labels["pod"] = ep.TargetRef.Name
			}
			for _, addr := range ep.Addresses {
				out = append(out, target{Targets: []string{net.JoinHostPort(addr, strconv.Itoa(int(*port.Port)))}, Labels: labels})
			}
		}
	}
	return out
}

func mustWriteJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, path, b)
}

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
