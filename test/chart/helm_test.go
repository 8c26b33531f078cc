// Package chart tests the Helm chart charts/kube-fstack with the pinned helm binary: helm lint
// --strict, golden files of the rendered output for several value sets, the values schema, the
// chart's RBAC and webhooks against the generated config/, and every rendered object accepted by
// a real kube-apiserver (envtest). Run it with `make test-chart`.
package chart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const (
	release   = "kube-fstack"
	namespace = "kube-fstack-system"
	// kubeVersion is what the chart is rendered for: the Kubernetes version envtest and the local
	// cluster run (hack/envtest-assets.sh).
	kubeVersion = "1.35.4"
)

var (
	root     = filepath.Join("..", "..")
	chartDir = filepath.Join(root, "charts", "kube-fstack")
)

// helmBin is the pinned helm: $HELM (make test-chart sets it) or the one make tools installed.
func helmBin(t testing.TB) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	found, _ := filepath.Glob(filepath.Join(root, "bin", "helm-v*"))
	if len(found) == 0 {
		t.Fatal("helm not found: run `make tools` (or `make test-chart`, which installs it)")
	}
	return found[len(found)-1]
}

// helm runs the pinned helm and returns stdout, stderr and its error.
func helm(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// valueSets are the files in testdata/values, each a way the chart is installed; its name
// (without .yaml) names its golden.
func valueSets(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no value sets in testdata/values: %v", err)
	}
	sets := make([]string, 0, len(files))
	for _, f := range files {
		sets = append(sets, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	sort.Strings(sets)
	return sets
}

// render is `helm template` of the chart with one value set, as `helm install` would render it.
func render(t testing.TB, set string) string {
	t.Helper()
	out, stderr, err := helm(t, "template", release, chartDir, "--namespace", namespace,
		"--kube-version", kubeVersion, "-f", filepath.Join("testdata", "values", set+".yaml"))
	if err != nil {
		t.Fatalf("helm template (%s): %v\n%s", set, err, stderr)
	}
	return out
}

// objects splits rendered YAML into objects, skipping empty documents.
func objects(t testing.TB, rendered string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(rendered, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("rendered document is not YAML: %v\n%s", err, doc)
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
	return objs
}

// find returns the rendered objects of one kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}
