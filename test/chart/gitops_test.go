package chart

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// gitopsPage is the page whose snippets these tests hold to the chart.
var gitopsPage = filepath.Join(root, "docs", "gitops.md")

// gitopsObjects are the objects of the page's YAML blocks.
func gitopsObjects(t *testing.T) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(gitopsPage)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	var out []map[string]any
	for _, b := range blocks {
		for _, doc := range strings.Split(b, "\n---\n") {
			var o map[string]any
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("docs/gitops.md: a YAML block is not YAML: %v\n%s", err, doc)
			}
			if len(o) > 0 {
				out = append(out, o)
			}
		}
	}
	return out
}

// gitopsOne is the page's only object of kind.
func gitopsOne(t *testing.T, objs []map[string]any, kind string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, o := range objs {
		if o["kind"] == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("docs/gitops.md has %d %s objects, want one", len(found), kind)
	}
	return found[0]
}

// str reads a string at path in a decoded object ("" when absent).
func str(o map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedString(o, path...)
	return s
}

// renderValues is helm template with the values the page gives, as the tool would install them.
func renderValues(t *testing.T, release, ns string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := helm(t, "template", release, chartDir, "--namespace", ns, "--kube-version", kubeVersion, "-f", f)
	if err != nil {
		t.Fatalf("helm template with the page's values: %v\n%s", err, stderr)
	}
	return objects(t, out)
}

// target finds the rendered object a rule names: group, kind and name.
func target(t *testing.T, objs []*unstructured.Unstructured, group, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GroupVersionKind().Group == group && (name == "" || o.GetName() == name) {
			return o
		}
	}
	t.Errorf("docs/gitops.md names %s %s.%s, which the chart does not render", kind, name, group)
	return nil
}

// pointerParent resolves a JSON pointer's parent in obj: the chart renders the object an ignored
// field belongs to, not the field (someone else writes it).
func pointerParent(obj any, pointer string) bool {
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	cur := obj
	for _, p := range parts[:len(parts)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(c) {
				return false
			}
			cur = c[i]
		default:
			return false
		}
		if cur == nil {
			return false
		}
	}
	_, ok := cur.(map[string]any)
	return ok
}

// jqStep is one step of the jq paths the page uses: .field, or .field[]? for every element.
var jqStep = regexp.MustCompile(`^\.([A-Za-z]+)(\[\]\??)?`)

// jqParents is how many objects the path's parent reaches in obj, and false when some element it
// iterates lacks the parent.
func jqParents(obj any, expr string) (int, bool) {
	var steps []struct {
		field string
		each  bool
	}
	for rest := expr; rest != ""; {
		m := jqStep.FindStringSubmatch(rest)
		if m == nil {
			return 0, false
		}
		steps = append(steps, struct {
			field string
			each  bool
		}{m[1], m[2] != ""})
		rest = rest[len(m[0]):]
	}
	cur := []any{obj}
	for _, s := range steps[:len(steps)-1] {
		var next []any
		for _, c := range cur {
			m, ok := c.(map[string]any)
			if !ok || m[s.field] == nil {
				return 0, false
			}
			if !s.each {
				next = append(next, m[s.field])
				continue
			}
			list, ok := m[s.field].([]any)
			if !ok {
				return 0, false
			}
			next = append(next, list...)
		}
		cur = next
	}
	for _, c := range cur {
		if _, ok := c.(map[string]any); !ok {
			return 0, false
		}
	}
	return len(cur), len(cur) > 0
}

// The CA bundle is written into every webhook of both configurations (by the operator or
// cert-manager's CA injector), so each configuration the chart renders must be covered.
var caWritten = []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}

// The page's Argo CD Application: its values render, every ignoreDifferences rule names an object
// the chart makes and a path inside it, every webhook configuration's caBundle is ignored, and
// the namespace it makes enforces privileged.
func TestGitOpsArgoCDApplicationFitsTheChart(t *testing.T) {
	app := gitopsOne(t, gitopsObjects(t), "Application")
	values, _, _ := unstructured.NestedMap(app, "spec", "source", "helm", "valuesObject")
	release, ns := str(app, "spec", "source", "helm", "releaseName"), str(app, "spec", "destination", "namespace")
	if release == "" || release != str(app, "metadata", "name") {
		t.Errorf("Application %q installs release %q: label tracking needs them equal", str(app, "metadata", "name"), release)
	}
	objs := renderValues(t, release, ns, values)
	rules, _, _ := unstructured.NestedSlice(app, "spec", "ignoreDifferences")
	covered := map[string]bool{}
	for _, r := range rules {
		rule := r.(map[string]any)
		o := target(t, objs, str(rule, "group"), str(rule, "kind"), str(rule, "name"))
		if o == nil {
			continue
		}
		exprs, _, _ := unstructured.NestedStringSlice(rule, "jqPathExpressions")
		ptrs, _, _ := unstructured.NestedStringSlice(rule, "jsonPointers")
		for _, e := range exprs {
			if _, ok := jqParents(o.Object, e); !ok {
				t.Errorf("%s %s: jq path %s does not lead into the rendered object", o.GetKind(), o.GetName(), e)
			}
			if strings.HasSuffix(e, ".caBundle") {
				covered[o.GetKind()+"/"+o.GetName()] = true
			}
		}
		for _, p := range ptrs {
			if !pointerParent(o.Object, p) {
				t.Errorf("%s %s: JSON pointer %s does not lead into the rendered object", o.GetKind(), o.GetName(), p)
			}
		}
	}
	for _, kind := range caWritten {
		for _, o := range find(objs, kind) {
			if !covered[kind+"/"+o.GetName()] {
				t.Errorf("the Application does not ignore the caBundle of %s %s", kind, o.GetName())
			}
		}
	}
	if got := str(app, "spec", "syncPolicy", "managedNamespaceMetadata", "labels", "pod-security.kubernetes.io/enforce"); got != "privileged" {
		t.Errorf("the Application's namespace enforces %q, want privileged (the CNI DaemonSet)", got)
	}
	opts, _, _ := unstructured.NestedStringSlice(app, "spec", "syncPolicy", "syncOptions")
	if !slices.Contains(opts, "RespectIgnoreDifferences=true") {
		t.Error("the Application syncs without RespectIgnoreDifferences=true: a sync could send its own caBundle")
	}
}

// The page's Flux HelmRelease: its values render, every drift ignore rule names an object the
// chart makes, and its JSON pointers (no wildcards in Flux) name the caBundle of each webhook the
// chart renders in each configuration, no more and no fewer.
func TestGitOpsFluxHelmReleaseFitsTheChart(t *testing.T) {
	page := gitopsObjects(t)
	hr := gitopsOne(t, page, "HelmRelease")
	values, _, _ := unstructured.NestedMap(hr, "spec", "values")
	release, ns := str(hr, "spec", "releaseName"), str(hr, "metadata", "namespace")
	objs := renderValues(t, release, ns, values)
	rules, _, _ := unstructured.NestedSlice(hr, "spec", "driftDetection", "ignore")
	covered := map[string][]string{}
	for _, r := range rules {
		rule := r.(map[string]any)
		o := target(t, objs, str(rule, "target", "group"), str(rule, "target", "kind"), str(rule, "target", "name"))
		if o == nil {
			continue
		}
		paths, _, _ := unstructured.NestedStringSlice(rule, "paths")
		for _, p := range paths {
			if !pointerParent(o.Object, p) {
				t.Errorf("%s %s: path %s does not lead into the rendered object", o.GetKind(), o.GetName(), p)
			}
		}
		covered[o.GetKind()+"/"+o.GetName()] = append(covered[o.GetKind()+"/"+o.GetName()], paths...)
	}
	for _, kind := range caWritten {
		for _, o := range find(objs, kind) {
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			var want []string
			for i := range hooks {
				want = append(want, "/webhooks/"+strconv.Itoa(i)+"/clientConfig/caBundle")
			}
			got := covered[kind+"/"+o.GetName()]
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("the HelmRelease ignores %v in %s %s, want the caBundle of each of its %d webhooks %v", got, kind, o.GetName(), len(hooks), want)
			}
		}
	}
	var nsObj map[string]any
	for _, o := range page {
		if o["kind"] == "Namespace" && str(o, "metadata", "name") == ns {
			nsObj = o
		}
	}
	if nsObj == nil || str(nsObj, "metadata", "labels", "pod-security.kubernetes.io/enforce") != "privileged" {
		t.Errorf("the page's Namespace %s does not enforce privileged (the CNI DaemonSet)", ns)
	}
}

// The page's table names every kind of Helm hook the chart renders and the lookup it does: a
// hook or lookup added to the chart fails here until the page says what it does under GitOps.
func TestGitOpsPageNamesEveryHookAndLookup(t *testing.T) {
	page, err := os.ReadFile(gitopsPage)
	if err != nil {
		t.Fatal(err)
	}
	hooks := map[string]bool{}
	for _, set := range valueSets(t) {
		for _, o := range objects(t, render(t, set)) {
			if h := o.GetAnnotations()["helm.sh/hook"]; h != "" {
				hooks[h] = true
			}
		}
	}
	if len(hooks) == 0 {
		t.Fatal("no hook in any value set's render: the test reads the wrong annotation")
	}
	for h := range hooks {
		if !strings.Contains(string(page), "`"+h+"`") {
			t.Errorf("the chart renders hooks %q, which docs/gitops.md does not name", h)
		}
	}
	templates, _ := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	for _, f := range templates {
		data, _ := os.ReadFile(f)
		for _, m := range regexp.MustCompile(`\$from := \.Values\.([A-Za-z.]+)`).FindAllStringSubmatch(string(data), -1) {
			if !strings.Contains(string(page), m[1]) {
				t.Errorf("%s looks up %s, which docs/gitops.md does not name", filepath.Base(f), m[1])
			}
		}
		if n := strings.Count(string(data), "lookup "); n > 0 && !strings.Contains(string(data), "$from := .Values.webhook.clientCAFrom") {
			t.Errorf("%s calls lookup %d times beyond webhook.clientCAFrom: say in docs/gitops.md what it reads", filepath.Base(f), n)
		}
	}
}
