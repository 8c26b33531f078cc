package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	fstackv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// prometheus is a real Prometheus (Debian's package) the test runs on the node: its own data
// directory, 127.0.0.1 only, targets found through the API server as the chart's monitors
// find them.
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

// writeConfig writes prometheus.yml: two jobs that find their targets through the API server
// (kubernetes_sd_configs, the ServiceAccount's token, the cluster's CA) and keep what the
// chart's monitors select. kube-fstack-operator is the ServiceMonitor: endpoints of the
// release's operator Services in its namespace, the port https-metrics, HTTPS without
// verification (a self-signed certificate), the bearer token. kube-fstack-dataplane is the
// PodMonitor: pods in any namespace with the stack label, the container port
// podcontract.MetricsPortName, the stack as a label.
func (p *prometheus) writeConfig(t *testing.T, token string) string {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ca := rc.CAFile
	if len(rc.CAData) > 0 {
		ca = filepath.Join(p.dir, "ca.crt")
		mustWrite(t, ca, rc.CAData)
	}
	tokenFile := filepath.Join(p.dir, "token")
	mustWrite(t, tokenFile, []byte(token))
	sd := func(role, namespaces string) string {
		return fmt.Sprintf(`
  kubernetes_sd_configs:
  - role: %s
    api_server: %s
    authorization: {credentials_file: %s}
    tls_config: {ca_file: %s}%s`, role, rc.Host, tokenFile, ca, namespaces)
	}
	label := func(l string) string { return strings.NewReplacer(".", "_", "/", "_", "-", "_").Replace(l) }
	cfg := fmt.Sprintf(`global: {scrape_interval: 2s, scrape_timeout: 2s}
scrape_configs:
- job_name: kube-fstack-operator
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: %[1]s}%[2]s
  relabel_configs:
  - {action: keep, source_labels: [__meta_kubernetes_service_label_app_kubernetes_io_instance, __meta_kubernetes_service_label_app_kubernetes_io_component], regex: '%[3]s;operator'}
  - {action: keep, source_labels: [__meta_kubernetes_endpoint_port_name], regex: https-metrics}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
- job_name: kube-fstack-dataplane%[4]s
  relabel_configs:
  - {action: keep, source_labels: [__meta_kubernetes_pod_labelpresent_%[5]s], regex: 'true'}
  - {action: keep, source_labels: [__meta_kubernetes_pod_container_port_name], regex: %[6]s}
  - {source_labels: [__meta_kubernetes_pod_label_%[5]s], target_label: stack}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
`, tokenFile, sd("endpoints", "\n    namespaces: {names: ["+env.Namespace+"]}"), env.Release,
		sd("pod", ""), label(fstackv1.StackLabel), podcontract.MetricsPortName)
	path := filepath.Join(p.dir, "prometheus.yml")
	mustWrite(t, path, []byte(cfg))
	return path
}

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
