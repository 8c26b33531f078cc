package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
)

// The chart's monitoring files, read as the chart ships them (charts/kube-fstack/files/monitoring).
func monitoringFile(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "charts", "kube-fstack", "files", "monitoring", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// chartAlerts is the rule file the chart's PrometheusRule carries, after promtool accepted it
// (Debian's, beside the prometheus binary the suite runs).
func chartAlerts(t *testing.T) string {
	t.Helper()
	rules := monitoringFile(t, "alerts.yaml")
	bin := os.Getenv("E2E_PROMTOOL")
	if bin == "" {
		bin = "promtool"
	}
	out, err := exec.Command(bin, "check", "rules", rules).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rules, err, out)
	}
	return rules
}

// checkAlertRules: Prometheus loaded every alert of the chart and evaluates each without an
// error; each one's metrics are in the real scrape (so none of them is an alert no series can
// fire: promtool's unit tests, test/chart, show each firing on such series); and the refusal the
// Prometheus step provoked makes FStackInjectionRefused pending or firing from real data.
func checkAlertRules(t *testing.T, prom *prometheus, pod *corev1.Pod) {
	raw, err := os.ReadFile(monitoringFile(t, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			want[r.Alert] = r.Expr
		}
	}
	waitRulesEvaluated(t, prom, want)
	for alert, expr := range want {
		for _, sel := range seriesOf(expr, pod) {
			if v := prom.vector(t, "count("+sel+")"); v[""] < 1 {
				t.Errorf("%s reads %s, which the real scrape lacks (%s)", alert, sel, expr)
			}
		}
	}
	prom.wait(t, "FStackInjectionRefused pending or firing for the refused pod (stack-not-found)", func(v map[string]float64) bool {
		return v["stack-not-found"] == 1
	}, `ALERTS{alertname="FStackInjectionRefused"}`, "reason")
}

// waitRulesEvaluated waits until Prometheus evaluated every alert of want at least once, and
// fails on one it does not have or cannot evaluate.
func waitRulesEvaluated(t *testing.T, prom *prometheus, want map[string]string) {
	t.Helper()
	var last string
	err := framework.Poll("every alert of the chart loaded and evaluated", 3*time.Minute, 2*time.Second, func() (bool, string, error) {
		_, body, err := prom.get("/api/v1/rules?type=alert")
		if err != nil {
			return false, err.Error(), nil
		}
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			return false, "", err
		}
		got := map[string]string{}
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				got[rule.Name] = rule.Health + rule.LastError
				if rule.Health == "err" {
					return false, "", fmt.Errorf("Prometheus cannot evaluate %s: %s", rule.Name, rule.LastError)
				}
			}
		}
		last = fmt.Sprint(got)
		for name := range want {
			if got[name] != "ok" {
				return false, last, nil
			}
		}
		return len(got) == len(want), last, nil
	})
	if err != nil {
		t.Fatalf("the chart's alerts in Prometheus: %v", err)
	}
	t.Logf("Prometheus evaluates the chart's %d alerts: %s", len(want), last)
}

var (
	exportedName = regexp.MustCompile(`\b(?:kube)?fstack_[a-z_]+(?:\{[^}]*\})?`)
	upSelector   = regexp.MustCompile(`\bup\{[^}]*\}`)
)

// seriesOf is each series selector an alert expression reads, limited to the demo's pod where
// the series is the dataplane's; a selector that asks for a label value the demo cannot have
// (needed="true" on the demo's node does exist: its pod's stack needs the node's checks) is
// kept as written.
func seriesOf(expr string, pod *corev1.Pod) []string {
	var out []string
	for _, s := range append(exportedName.FindAllString(expr, -1), upSelector.FindAllString(expr, -1)...) {
		if strings.HasPrefix(s, "fstack_") || strings.HasPrefix(s, "up{") {
			s = addMatcher(s, fmt.Sprintf(`pod=%q`, pod.Name))
		}
		out = append(out, s)
	}
	return out
}

func addMatcher(sel, m string) string {
	if i := strings.IndexByte(sel, '{'); i >= 0 {
		return sel[:i+1] + m + "," + sel[i+1:]
	}
	return sel + "{" + m + "}"
}

// checkDashboardQueries runs every query of the chart's dashboard, with its variables set to the
// demo's namespace, stack and pod, against Prometheus, and wants at least one series from each;
// each variable's own query must offer the demo's value.
func checkDashboardQueries(t *testing.T, prom *prometheus, pod *corev1.Pod) {
	raw, err := os.ReadFile(monitoringFile(t, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name string `json:"name"`
				Type string `json:"type"`
				// A query variable's query is an object; the data source picker's a string.
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"namespace": injectedNS, "stack": stackName, "pod": pod.Name}
	subst := strings.NewReplacer("$namespace", injectedNS, "$stack", stackName, "$pod", pod.Name,
		"$__rate_interval", "1m", "${namespace}", injectedNS, "${stack}", stackName, "${pod}", pod.Name)
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*([a-z_]+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue // the data source picker
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil || m[2] != v.Name {
			t.Errorf("variable %s: query %q is not label_values(<series>, %s)", v.Name, q.Query, v.Name)
			continue
		}
		count := fmt.Sprintf("count by (%s) (%s)", m[2], subst.Replace(m[1]))
		prom.wait(t, fmt.Sprintf("variable %s offers %s", v.Name, vars[v.Name]), func(got map[string]float64) bool {
			return got[vars[v.Name]] >= 1
		}, count, m[2])
	}
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q := subst.Replace(tg.Expr)
			if strings.Contains(q, "$") {
				t.Errorf("panel %q: a variable the test does not set is left in %s", p.Title, q)
				continue
			}
			n++
			// Keyed by every label a panel splits by, so the log shows each series.
			prom.wait(t, fmt.Sprintf("panel %q answers %s", p.Title, q), func(got map[string]float64) bool { return len(got) > 0 },
				q, "__name__", "process", "port", "result", "reason", "node", "check", "needed")
		}
	}
	if n == 0 {
		t.Fatal("the dashboard has no queries")
	}
	t.Logf("all %d dashboard queries answered for %s/%s (stack %s)", n, injectedNS, pod.Name, stackName)
	t.Logf("graph the key panels: http://%s/graph?g0.expr=%s&g0.tab=0&g0.range_input=15m", prom.addr,
		url.QueryEscape(subst.Replace(`fstack_process_up{namespace=~"$namespace",stack=~"$stack",pod=~"$pod"}`)))
}
