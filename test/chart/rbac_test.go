package chart

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// leaseName is the operator's leader-election Lease (LeaderElectionID), the same in every release.
const leaseName = "kube-fstack-operator.kubefstack.io"

// TestRBACIsGenerated: the chart's operator ClusterRole and Role grant what controller-gen
// generated from the operator's markers (config/rbac/role.yaml) and nothing more. Two changes are
// the chart's on purpose, and each is checked here rather than trusted:
//   - resourceNames in the markers are the operator's flag defaults; the chart names the objects
//     this release makes and passes to the operator (checked with the test's release, whose names
//     are the defaults, and with another release name, whose are not);
//   - rules the configured operator never uses are left out: the webhook configurations and
//     Secrets when cert-manager issues the certificate, TokenReviews and SubjectAccessReviews
//     when metrics are off.
func TestRBACIsGenerated(t *testing.T) {
	generated := config(t, "rbac", "role.yaml")
	for _, set := range valueSets(t) {
		defaults := objects(t, render(t, set))
		for _, rel := range []string{release, "edge"} {
			rendered := objects(t, renderRelease(t, rel, set))
			// What each named object is called in the test's release (the markers' names) and in this one.
			names := map[string]string{leaseName: leaseName}
			relFlags := operatorFlags(t, find(rendered, "Deployment")[0])
			for flag, def := range namingFlags(t, defaults) {
				names[def] = relFlags[flag]
			}
			unused := unusedResources(t, rendered)
			for _, kind := range []string{"ClusterRole", "Role"} {
				want := find(generated, kind)
				got := operatorRole(t, rendered, kind)
				if len(want) != 1 {
					t.Fatalf("config/rbac/role.yaml has %d %ss, want one", len(want), kind)
				}
				rules := expectedRules(t, want[0], names, unused)
				if !reflect.DeepEqual(rules, got.Object["rules"]) {
					t.Errorf("%s, release %s: the chart's %s rules are not config/rbac/role.yaml's with the release's names (run make generate, or map the name in kube-fstack.generatedRules)\nchart: %v\nwant:  %v",
						set, rel, kind, got.Object["rules"], rules)
				}
			}
			if ns := operatorRole(t, rendered, "Role").GetNamespace(); ns != namespace {
				t.Errorf("%s: Role in namespace %q, want the release namespace %q", set, ns, namespace)
			}
		}
	}
}

// TestMetricsReader: with metrics on, the chart has a ClusterRole that lets a scraper get
// /metrics and nothing else, and a Service in front of the operator's metrics port.
func TestMetricsReader(t *testing.T) {
	for _, set := range valueSets(t) {
		rendered := objects(t, render(t, set))
		flags := operatorFlags(t, find(rendered, "Deployment")[0])
		var reader *unstructured.Unstructured
		for _, r := range find(rendered, "ClusterRole") {
			if r.GetName() == release+"-metrics-reader" {
				reader = r
			}
		}
		if flags["--metrics-bind-address"] == "0" {
			if reader != nil {
				t.Errorf("%s: metrics are off, yet a metrics-reader ClusterRole is rendered", set)
			}
			continue
		}
		if _, ok := flags["--metrics-insecure"]; ok {
			t.Errorf("%s: the chart serves metrics without authentication", set)
		}
		if reader == nil {
			t.Fatalf("%s: metrics are on and no %s-metrics-reader ClusterRole is rendered", set, release)
		}
		want := []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}
		if !reflect.DeepEqual(reader.Object["rules"], want) {
			t.Errorf("%s: metrics-reader rules %v, want %v", set, reader.Object["rules"], want)
		}
		found := false
		for _, s := range find(rendered, "Service") {
			ports, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports")
			for _, p := range ports {
				found = found || p.(map[string]any)["targetPort"] == "metrics"
			}
		}
		if !found {
			t.Errorf("%s: no Service targets the operator's metrics port", set)
		}
	}
}

// renderRelease is render with another release name.
func renderRelease(t *testing.T, rel, set string) string {
	t.Helper()
	out, stderr, err := helm(t, "template", rel, chartDir, "--namespace", namespace,
		"--kube-version", kubeVersion, "-f", filepath.Join("testdata", "values", set+".yaml"))
	if err != nil {
		t.Fatalf("helm template %s (%s): %v\n%s", rel, set, err, stderr)
	}
	return out
}

// namingFlags are the operator's flags that name an object it writes by name, with their values.
func namingFlags(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	flags := operatorFlags(t, find(objs, "Deployment")[0])
	out := map[string]string{}
	for _, f := range []string{"--mutating-webhook-configuration", "--validating-webhook-configuration", "--cert-secret"} {
		out[f] = flags[f]
	}
	return out
}

// unusedResources are the resources the rendered operator's flags say it never touches.
func unusedResources(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	flags := operatorFlags(t, find(objs, "Deployment")[0])
	var out []string
	if flags["--manage-certs"] != "true" {
		out = append(out, "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "secrets")
	}
	if flags["--metrics-bind-address"] == "0" {
		out = append(out, "tokenreviews", "subjectaccessreviews")
	}
	return out
}

// expectedRules are role's rules without those on unused resources, resourceNames renamed.
func expectedRules(t *testing.T, role *unstructured.Unstructured, names map[string]string, unused []string) []any {
	t.Helper()
	var out []any
	for _, r := range role.Object["rules"].([]any) {
		rule := runtime.DeepCopyJSONValue(r).(map[string]any)
		res, _, _ := unstructured.NestedStringSlice(rule, "resources")
		if slices.ContainsFunc(res, func(s string) bool { return slices.Contains(unused, s) }) {
			continue
		}
		if rn, ok := rule["resourceNames"].([]any); ok {
			for i, n := range rn {
				to, known := names[n.(string)]
				if !known {
					t.Fatalf("config/rbac/role.yaml names %q, which is no object the chart passes to the operator", n)
				}
				rn[i] = to
			}
		}
		out = append(out, rule)
	}
	return out
}

// operatorRole is the operator's own ClusterRole or Role (not the metrics reader).
func operatorRole(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	deploy := find(objs, "Deployment")[0]
	for _, o := range find(objs, kind) {
		if o.GetName() == deploy.GetName() {
			return o
		}
	}
	t.Fatalf("no %s named as the operator's Deployment %s", kind, deploy.GetName())
	return nil
}

// webhookService is the Service the API server calls the webhooks through.
func webhookService(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	for _, s := range find(objs, "Service") {
		ports, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports")
		for _, p := range ports {
			if p.(map[string]any)["targetPort"] == "webhook" {
				return s
			}
		}
	}
	t.Fatal("no Service targets the webhook port")
	return nil
}
