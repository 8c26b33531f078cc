// Package docs tests what the user documentation shows against the tree: a snippet that says it
// is a sample file in full is that file, a workload snippet is one the injector accepts, the
// quickstart's files fit the chart's defaults, and every `helm upgrade` keeps the user's values
// and takes the new chart's defaults; and that the developer guide's map of rooms names every
// package. Part of the unit tier (make test-unit).
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var root = filepath.Join("..", "..")

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// userDocs are the pages a user reads: the README, docs/ (not the developer guide), the chart's
// README.
func userDocs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md", filepath.Join("charts", "kube-fstack", "README.md")}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		out = append(out, rel)
	}
	return out
}

// fence is one fenced code block and the marker comment right above it, if any.
type fence struct {
	line   int
	lang   string
	marker string
	body   string
}

// inFullMarker, on the line above a fence, says the block is that file of the tree, byte for
// byte: `<!-- in full: config/samples/quickstart/stack.yaml -->`.
var inFullMarker = regexp.MustCompile(`^<!-- in full: (\S+) -->$`)

func fences(t *testing.T, rel string) []fence {
	t.Helper()
	var out []fence
	var cur *fence
	prev := ""
	sc := bufio.NewScanner(strings.NewReader(read(t, rel)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &fence{line: n, lang: strings.TrimPrefix(trimmed, "```")}
			if m := inFullMarker.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.marker = m[1]
			}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
		prev = line
	}
	if cur != nil {
		t.Fatalf("%s:%d: a fence is never closed", rel, cur.line)
	}
	return out
}

// The README's first stack is config/samples/quickstart/stack.yaml in full, and so is every
// block a page marks "in full": a snippet that drifts from the file it names fails here.
func TestSnippetsInFullAreTheirFiles(t *testing.T) {
	found := map[string]bool{}
	for _, rel := range userDocs(t) {
		for _, f := range fences(t, rel) {
			if f.marker == "" {
				continue
			}
			found[rel+" "+f.marker] = true
			if want := read(t, f.marker); f.body != want {
				t.Errorf("%s:%d: the block marked in full as %s is not that file; make them the same:\n--- block\n%s--- file\n%s",
					rel, f.line, f.marker, f.body, want)
			}
		}
	}
	for _, want := range []string{"README.md config/samples/quickstart/stack.yaml", "docs/quickstart.md config/samples/quickstart/stack.yaml",
		"docs/quickstart.md config/samples/quickstart/nginx.yaml", "docs/quickstart.md config/samples/quickstart/service.yaml"} {
		if !found[want] {
			t.Errorf("no block marked in full in %s", want)
		}
	}
}

// helmUpgrade is a `helm upgrade` command, its continuation lines joined.
var helmUpgrade = regexp.MustCompile(`(?m)^\s*(?:\$ )?(?:bin/helm-v[0-9.]+|helm) upgrade\b(?:[^\n]*\\\n)*[^\n]*`)

// Every `helm upgrade` the docs give keeps the values the user installed with and takes the new
// chart's defaults: --reset-then-reuse-values (Helm 3.14 and later), or the user's values file.
// Without either, a --set on upgrade drops every earlier value; --reuse-values alone keeps the
// old chart's defaults, so a value a new chart adds is missing.
func TestHelmUpgradeKeepsValuesAndTakesNewDefaults(t *testing.T) {
	n := 0
	for _, rel := range userDocs(t) {
		for _, cmd := range helmUpgrade.FindAllString(read(t, rel), -1) {
			n++
			cmd = strings.TrimSpace(cmd)
			if strings.Contains(cmd, "--reset-then-reuse-values") || regexp.MustCompile(`(?:^|\s)(?:-f|--values)[ =]`).MatchString(cmd) {
				continue
			}
			t.Errorf("%s: %q neither keeps the installed values with the new defaults (--reset-then-reuse-values) nor passes a values file (-f)", rel, cmd)
		}
	}
	if n == 0 {
		t.Fatal("no helm upgrade command found in the docs: the pattern is wrong")
	}
}

// The quickstart's Helm install and the stack agree: the NetworkAttachmentDefinition the stack's
// port names is the one the chart makes, in the stack's namespace, and the pool is inside the
// chart's default subnet.
func TestQuickstartFitsTheChart(t *testing.T) {
	var values struct {
		NetworkAttachmentDefinition struct {
			Name   string
			Config struct{ IPAM struct{ Subnet string } }
		} `json:"networkAttachmentDefinition"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "charts/kube-fstack/values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	si := quickstartStack(t)
	port := si.Spec.Ports[0]
	if port.Network == nil || port.Network.Name != values.NetworkAttachmentDefinition.Name || port.Network.Namespace != "" {
		t.Errorf("the stack's network %+v, want the chart's NetworkAttachmentDefinition %q in its own namespace",
			port.Network, values.NetworkAttachmentDefinition.Name)
	}
	subnet := values.NetworkAttachmentDefinition.Config.IPAM.Subnet
	for _, r := range port.IPv4.Pool.Ranges {
		if !inSubnet(t, r, subnet) {
			t.Errorf("pool range %s is outside the chart's subnet %s: fstack-cni refuses it at ADD", r, subnet)
		}
	}
	if !inSubnet(t, port.IPv4.Gateway, subnet) {
		t.Errorf("gateway %s is outside the chart's subnet %s", port.IPv4.Gateway, subnet)
	}
	qs := read(t, "docs/quickstart.md")
	for _, want := range []string{
		"kubectl create namespace " + si.Namespace,
		"kubectl label namespace " + si.Namespace + " kubefstack.io/injection=enabled",
		"networkAttachmentDefinition.namespaces={" + si.Namespace + "}",
		"cni.nodeConfig.namespaces={" + si.Namespace + "}",
		"networkAttachmentDefinition.enabled=true",
	} {
		if !strings.Contains(qs, want) {
			t.Errorf("docs/quickstart.md lacks %q", want)
		}
	}
}
