package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var (
	monitoringFiles = filepath.Join(chartDir, "files", "monitoring")
	rulesFile       = filepath.Join(monitoringFiles, "alerts.yaml")
	rulesTestFile   = filepath.Join(monitoringFiles, "alerts.test.yaml")
	dashboardFile   = filepath.Join(monitoringFiles, "dashboard.json")
)

// ruleFile is a Prometheus rule file (and a PrometheusRule's spec).
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// TestAlertsAndDashboardOnlyWhenEnabled: the defaults, and the monitors alone, render neither;
// each is its own switch.
func TestAlertsAndDashboardOnlyWhenEnabled(t *testing.T) {
	for _, set := range []string{"default", "monitoring", "monitoring-custom"} {
		rendered := objects(t, render(t, set))
		if got := find(rendered, "PrometheusRule"); len(got) != 0 {
			t.Errorf("%s renders %d PrometheusRule(s)", set, len(got))
		}
		if d := dashboards(rendered); len(d) != 0 {
			t.Errorf("%s renders the dashboard ConfigMap", set)
		}
	}
	rendered := objects(t, render(t, "monitoring-alerts"))
	if len(find(rendered, "PrometheusRule")) != 1 || len(dashboards(rendered)) != 1 {
		t.Fatalf("monitoring-alerts: want one PrometheusRule and one dashboard ConfigMap")
	}
	only := func(set ...string) []*unstructured.Unstructured {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, stderr, err := helm(t, args...)
		if err != nil {
			t.Fatalf("helm template %v: %v\n%s", set, err, stderr)
		}
		return objects(t, out)
	}
	if o := only("monitoring.prometheusRule.enabled=true"); len(find(o, "PrometheusRule")) != 1 || len(dashboards(o)) != 0 {
		t.Error("monitoring.prometheusRule.enabled alone: want the PrometheusRule and no dashboard")
	}
	if o := only("monitoring.dashboard.enabled=true"); len(find(o, "PrometheusRule")) != 0 || len(dashboards(o)) != 1 {
		t.Error("monitoring.dashboard.enabled alone: want the dashboard and no PrometheusRule")
	}
}

func dashboards(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, cm := range find(objs, "ConfigMap") {
		if strings.HasSuffix(cm.GetName(), "-dashboard") {
			out = append(out, cm)
		}
	}
	return out
}

// TestPrometheusRule: the PrometheusRule carries the rule file as it is, with the labels asked
// for, and every alert has a for, a severity, a summary and description that name the pod
// (or node) it is about, a runbook citing a section of docs/alerts.md (which
// hack/check-doc-refs.sh resolves) and a runbook_url linking that section's anchor for the
// alert (checkRunbookURL).
func TestPrometheusRule(t *testing.T) {
	rendered := find(objects(t, render(t, "monitoring-alerts")), "PrometheusRule")[0]
	if rendered.GetLabels()["release"] != "prometheus" {
		t.Errorf("the PrometheusRule lacks monitoring.prometheusRule.labels: %v", rendered.GetLabels())
	}
	spec, _, _ := unstructured.NestedMap(rendered.Object, "spec")
	fromChart, _ := json.Marshal(spec)
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(fromChart) != string(fromFile) {
		t.Fatalf("the PrometheusRule's spec is not %s:\n%s\n%s", rulesFile, fromChart, fromFile)
	}
	rules := readRules(t)
	runbook := regexp.MustCompile(`^docs/alerts\.md §[0-9]+$`)
	doc, err := os.ReadFile(alertsDocFile)
	if err != nil {
		t.Fatal(err)
	}
	alertsDoc := string(doc)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name (recording rules belong elsewhere): %s", g.Name, r.Expr)
				continue
			}
			if r.For == "" {
				t.Errorf("%s: no for: one bad scrape would page", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			a := r.Annotations
			if a["summary"] == "" || a["description"] == "" || !runbook.MatchString(a["runbook"]) {
				t.Errorf("%s: want summary, description and a runbook `docs/alerts.md §N`, got %v", r.Alert, a)
			}
			if err := checkRunbookURL(r.Alert, a, alertsDoc); err != nil {
				t.Errorf("%s: %v", r.Alert, err)
			}
			names := []string{"$labels.pod", "$labels.stack", "$labels.node"}
			switch {
			case g.Name == "kube-fstack-dataplane":
			case strings.Contains(r.Expr, "node_check"):
				names = []string{"$labels.node"}
			default: // the operator's: its namespace and what it counted
				names = []string{"$labels.namespace"}
			}
			for _, want := range names {
				if !strings.Contains(a["description"], want) {
					t.Errorf("%s: the description does not name %s: %s", r.Alert, want, a["description"])
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts")
	}
}

// runbookBase is where the runbooks are published: docs/alerts.md on the project's main branch.
const runbookBase = "https://github.com/kube-fstack/kube-fstack/blob/main/docs/alerts.md#"

var alertsDocFile = filepath.Join("..", "..", "docs", "alerts.md")

// checkRunbookURL: the alert's runbook_url is runbookBase and the alert's name in lower case,
// and doc (docs/alerts.md) has that anchor inside the section the runbook annotation cites, so
// the link lands on what to do about this alert.
func checkRunbookURL(alert string, annotations map[string]string, doc string) error {
	url, ok := annotations["runbook_url"]
	if !ok {
		return fmt.Errorf("no runbook_url annotation: Alertmanager and Grafana link nothing")
	}
	anchor := strings.ToLower(alert)
	if url != runbookBase+anchor {
		return fmt.Errorf("runbook_url %q, want %q", url, runbookBase+anchor)
	}
	sec := strings.TrimPrefix(annotations["runbook"], "docs/alerts.md ")
	start := strings.Index(doc, "\n## "+sec+" ")
	if start < 0 {
		return fmt.Errorf("docs/alerts.md has no section %s (the runbook annotation)", sec)
	}
	body := doc[start+1:]
	if end := strings.Index(body[1:], "\n## "); end >= 0 {
		body = body[:end+1]
	}
	if !strings.Contains(body, `<a id="`+anchor+`"></a>`) {
		return fmt.Errorf("docs/alerts.md %s has no anchor <a id=%q></a> for runbook_url", sec, anchor)
	}
	return nil
}

func readRules(t *testing.T) *ruleFile {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	rules := &ruleFile{}
	if err := yaml.UnmarshalStrict(raw, rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return rules
}

// promtool is Debian's (package prometheus), or $PROMTOOL.
func promtool(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PROMTOOL")
	if bin == "" {
		bin = "promtool"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("no promtool (%v): install Debian's prometheus package (hack/install-deps.sh), or set PROMTOOL", err)
	}
	return path
}

// TestAlertsPromtool: promtool accepts the rules, and its unit tests (alerts.test.yaml) pass;
// those must make every alert fire at least once, since an alert no series can fire is a
// defect nobody notices until the outage it should have reported.
func TestAlertsPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	raw, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			fired[a.Alertname] = fired[a.Alertname] || len(a.ExpAlerts) > 0
		}
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if !fired[r.Alert] {
				t.Errorf("%s: no test in %s makes it fire", r.Alert, rulesTestFile)
			}
		}
	}
}

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Datasource map[string]string `json:"datasource"`
	Targets    []struct {
		Expr       string            `json:"expr"`
		Datasource map[string]string `json:"datasource"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// grafanaBuiltins are the variables Grafana defines itself.
var grafanaBuiltins = []string{"__rate_interval", "__interval", "__range", "__all"}

var variableRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// TestDashboardConfigMap: the ConfigMap carries dashboard.json unchanged, labelled and annotated
// as the values say, where they say; the JSON parses, every panel has a query on the chosen
// data source, and every variable a query uses is defined (datasource, namespace, stack, pod).
func TestDashboardConfigMap(t *testing.T) {
	cm := dashboards(objects(t, render(t, "monitoring-alerts")))[0]
	if cm.GetNamespace() != "monitoring" || cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetAnnotations()["grafana_folder"] != "F-Stack" {
		t.Errorf("dashboard ConfigMap %s/%s: labels %v, annotations %v; want namespace monitoring, grafana_dashboard=1, grafana_folder=F-Stack",
			cm.GetNamespace(), cm.GetName(), cm.GetLabels(), cm.GetAnnotations())
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 1 || strings.TrimSpace(data["kube-fstack.json"]) != strings.TrimSpace(string(raw)) {
		t.Fatalf("the ConfigMap's data is not %s as it is: keys %d", dashboardFile, len(data))
	}
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
		"--set", "monitoring.dashboard.enabled=true", "--set", "monitoring.dashboard.label.name=example.com/dashboards",
		"--set", "monitoring.dashboard.label.value=fstack", "--set", "monitoring.dashboard.folder="}
	out, stderr, err := helm(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	cm = dashboards(objects(t, out))[0]
	if cm.GetNamespace() != namespace || cm.GetLabels()["example.com/dashboards"] != "fstack" || len(cm.GetAnnotations()) != 0 {
		t.Errorf("custom label, no folder: got %s/%s labels %v annotations %v", cm.GetNamespace(), cm.GetName(), cm.GetLabels(), cm.GetAnnotations())
	}
	checkDashboard(t, readDashboard(t))
}

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	d := &dashboard{}
	if err := json.Unmarshal(raw, d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

func checkDashboard(t *testing.T, d *dashboard) {
	t.Helper()
	defined := slices.Clone(grafanaBuiltins)
	for _, v := range d.Templating.List {
		defined = append(defined, v.Name)
	}
	for _, want := range []string{"datasource", "namespace", "stack", "pod"} {
		if !slices.Contains(defined, want) {
			t.Errorf("the dashboard has no variable %q", want)
		}
	}
	checkRefs := func(where, text string) {
		for _, m := range variableRef.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(defined, m[1]) {
				t.Errorf("%s uses $%s, which the dashboard does not define", where, m[1])
			}
		}
	}
	for _, v := range d.Templating.List {
		q, _ := json.Marshal(v.Query)
		checkRefs("variable "+v.Name, string(q))
	}
	panels := 0
	for _, p := range allPanels(d.Panels) {
		if p.Type == "row" {
			continue
		}
		panels++
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.Datasource["uid"] != "${datasource}" {
			t.Errorf("panel %q: data source %v, want the datasource variable", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			checkRefs("panel "+p.Title, tg.Expr)
		}
	}
	if panels == 0 {
		t.Fatal("the dashboard has no panels")
	}
}

// allPanels flattens rows' collapsed panels into the list.
func allPanels(ps []dashboardPanel) []dashboardPanel {
	var out []dashboardPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// TestDashboardCatchesUndefined: checkDashboard fails a query that names a variable nobody
// defines and a panel without a query (so the test above can fail).
func TestDashboardCatchesUndefined(t *testing.T) {
	d := readDashboard(t)
	d.Panels = append(d.Panels, dashboardPanel{Type: "stat", Title: "broken", Datasource: map[string]string{"uid": "${datasource}"}})
	d.Panels[1].Targets[0].Expr += `{x=~"$cluster"}`
	ft := &testing.T{}
	done := make(chan struct{})
	go func() { defer close(done); checkDashboard(ft, d) }()
	<-done
	if !ft.Failed() {
		t.Fatal("checkDashboard accepted an undefined $cluster and a panel without a query")
	}
}

var metricName = regexp.MustCompile(`\b(k?fstack|kubefstack)_[a-z_]+\b`)

// TestMonitoringNamesExportedMetrics: every fstack_* and kubefstack_* name the alerts and the
// dashboard query is a name the supervisor's or the operator's code exports (the e2e suite then
// finds each in a real scrape).
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	var code strings.Builder
	for _, dir := range []string{"dataplane-image/internal/supervisor", "operator/internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			code.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{rulesFile, dashboardFile} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range metricName.FindAllString(string(raw), -1) {
			if !strings.Contains(code.String(), `"`+name+`"`) {
				t.Errorf("%s queries %s, which no exporter names", f, name)
			}
		}
	}
}

// TestDashboardValuesRefused: a label the API server would refuse fails at the values schema.
func TestDashboardValuesRefused(t *testing.T) {
	schemaRefuses(t, []string{"monitoring.dashboard.label.name=bad label"}, []string{"label", "name"})
	schemaRefuses(t, []string{"monitoring.dashboard.namespace=Bad_NS"}, []string{"namespace"})
	schemaRefuses(t, []string{"monitoring.prometheusRule.enable=true"}, []string{"enable"})
}

// TestRunbookURLCheckFails: the check refuses an alert without runbook_url, with another page's
// or another alert's anchor, and an anchor outside the cited section.
func TestRunbookURLCheckFails(t *testing.T) {
	doc := "# Alerts\n## §1 A\n<a id=\"fstacka\"></a>\ntext\n## §2 B\n<a id=\"fstackb\"></a>\n"
	ok := map[string]string{"runbook": "docs/alerts.md §1", "runbook_url": runbookBase + "fstacka"}
	if err := checkRunbookURL("FStackA", ok, doc); err != nil {
		t.Fatalf("a good runbook_url refused: %v", err)
	}
	for name, a := range map[string]map[string]string{
		"missing":         {"runbook": "docs/alerts.md §1"},
		"another page":    {"runbook": "docs/alerts.md §1", "runbook_url": "https://example.invalid/runbooks#fstacka"},
		"another alert":   {"runbook": "docs/alerts.md §1", "runbook_url": runbookBase + "fstackb"},
		"outside section": {"runbook": "docs/alerts.md §2", "runbook_url": runbookBase + "fstacka"},
		"no such section": {"runbook": "docs/alerts.md " + "§9", "runbook_url": runbookBase + "fstacka"},
	} {
		if err := checkRunbookURL("FStackA", a, doc); err == nil {
			t.Errorf("%s: accepted %v", name, a)
		}
	}
}
