package chart

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// imageSets are the three images of the chart, each a {repository, tag, digest, pullPolicy}.
var imageSets = []string{"operator", "cni", "dataplane"}

// chartMeta is the part of a Chart.yaml the release tests read.
type chartMeta struct {
	Version     string   `json:"version"`
	AppVersion  string   `json:"appVersion"`
	Home        string   `json:"home"`
	Sources     []string `json:"sources"`
	Keywords    []string `json:"keywords"`
	Maintainers []struct {
		Name string `json:"name"`
	} `json:"maintainers"`
}

func readChartMeta(t *testing.T, data []byte) chartMeta {
	t.Helper()
	var m chartMeta
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("Chart.yaml: %v\n%s", err, data)
	}
	return m
}

// renderedImages: every container image of the rendered objects by "<kind>/<name>/<container>",
// and the operator's --dataplane-image as "dataplane".
func renderedImages(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		spec, ok, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		if !ok {
			continue
		}
		for _, list := range []string{"initContainers", "containers"} {
			cs, _, _ := unstructured.NestedSlice(spec, list)
			for _, c := range cs {
				m := c.(map[string]any)
				out[o.GetKind()+"/"+o.GetName()+"/"+m["name"].(string)], _ = m["image"].(string)
			}
		}
		if o.GetKind() == "Deployment" {
			if img, ok := operatorFlags(t, o)["--dataplane-image"]; ok {
				out["dataplane"] = img
			}
		}
	}
	if _, ok := out["dataplane"]; !ok {
		t.Fatal("the operator Deployment has no --dataplane-image")
	}
	return out
}

// wantImages: which of the three images each rendered container must run (the CNI DaemonSet's
// installer and node agent and the node-cleanup Job run the CNI image).
func wantImages(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	seen := map[string]bool{}
	for _, k := range keys {
		comp := "cni"
		switch {
		case k == "dataplane":
			comp = "dataplane"
		case strings.HasPrefix(k, "Deployment/"):
			comp = "operator"
		}
		seen[comp] = true
		if got[k] != want[comp] {
			t.Errorf("%s runs %q, want %q (%s.image)", k, got[k], want[comp], comp)
		}
	}
	for _, comp := range imageSets {
		if !seen[comp] {
			t.Errorf("no rendered object runs the %s image", comp)
		}
	}
}

// TestImageReferences: the three images are named the same way, {repository, tag, digest}: the
// tag defaults to the chart's appVersion, a digest wins over the tag, and the operator's
// --dataplane-image is the dataplane's full reference.
func TestImageReferences(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	app := readChartMeta(t, data).AppVersion
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		set  []string
		want map[string]string
	}{
		{"defaults: the appVersion", nil, map[string]string{
			"operator":  "localhost/kube-fstack/operator:" + app,
			"cni":       "localhost/kube-fstack/cni:" + app,
			"dataplane": "localhost/kube-fstack/dataplane:" + app,
		}},
		{"tags and repositories", []string{
			"operator.image.repository=registry.example:5000/kf/operator", "operator.image.tag=v1.2.3",
			"cni.image.tag=dev", "dataplane.image.repository=registry.example/kf/dataplane", "dataplane.image.tag=v1.25.0",
		}, map[string]string{
			"operator":  "registry.example:5000/kf/operator:v1.2.3",
			"cni":       "localhost/kube-fstack/cni:dev",
			"dataplane": "registry.example/kf/dataplane:v1.25.0",
		}},
		{"a digest wins over the tag", []string{
			"operator.image.digest=" + digest, "cni.image.tag=dev", "cni.image.digest=" + digest,
			"dataplane.image.tag=v1.25.0", "dataplane.image.digest=" + digest,
		}, map[string]string{
			"operator":  "localhost/kube-fstack/operator@" + digest,
			"cni":       "localhost/kube-fstack/cni@" + digest,
			"dataplane": "localhost/kube-fstack/dataplane@" + digest,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, stderr, err := helm(t, args...)
			if err != nil {
				t.Fatalf("helm template --set %v: %v\n%s", tc.set, err, stderr)
			}
			wantImages(t, renderedImages(t, objects(t, out)), tc.want)
		})
	}
}

// TestImageValuesRefused: the old plain-string dataplane.image and references smuggled into the
// parts of an image value are refused by the schema, naming the key.
func TestImageValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want []string
	}{
		{"dataplane.image as a string", []string{"dataplane.image=registry.example/kf/dataplane:v1"}, []string{"dataplane", "image"}},
		{"a tag in the repository", []string{"operator.image.repository=registry.example/kf/operator:v1"}, []string{"operator", "repository"}},
		{"a digest in the repository", []string{"cni.image.repository=registry.example/kf/cni@sha256:00"}, []string{"cni", "repository"}},
		{"a short digest", []string{"dataplane.image.digest=sha256:abc"}, []string{"dataplane", "digest"}},
		{"a tag with a colon", []string{"cni.image.tag=v1:2"}, []string{"cni", "tag"}},
		{"the old dataplane.pullPolicy", []string{"dataplane.pullPolicy=Never"}, []string{"pullPolicy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The Kubernetes version the chart requires, so only the schema can refuse.
			schemaRefuses(t, tc.set, tc.want, "--kube-version", kubeVersion)
		})
	}
}

// TestLocalClusterValues: the values the local cluster and kind install with name the images
// hack/cluster/images.sh builds and imports (tag dev, never pulled), not the chart's appVersion,
// and hack/run.sh's DATAPLANE=real override names the real dataplane image it builds.
func TestLocalClusterValues(t *testing.T) {
	local := map[string]string{
		"operator":  "localhost/kube-fstack/operator:dev",
		"cni":       "localhost/kube-fstack/cni:dev",
		"dataplane": "localhost/kube-fstack/dataplane-standin:dev",
	}
	withReal := map[string]string{}
	for k, v := range local {
		withReal[k] = v
	}
	withReal["dataplane"] = "localhost/kube-fstack/dataplane:dev"
	for _, tc := range []struct {
		values string
		set    []string
		want   map[string]string
	}{
		{"hack/cluster/values.yaml", nil, local},
		{"hack/kind/values.yaml", nil, local},
		// hack/run.sh, DATAPLANE=real
		{"hack/cluster/values.yaml", []string{"dataplane.image.repository=localhost/kube-fstack/dataplane", "dataplane.image.tag=dev"}, withReal},
	} {
		t.Run(tc.values, func(t *testing.T) {
			args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
				"-f", filepath.Join(root, tc.values)}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, stderr, err := helm(t, args...)
			if err != nil {
				t.Fatalf("helm template -f %s: %v\n%s", tc.values, err, stderr)
			}
			wantImages(t, renderedImages(t, objects(t, out)), tc.want)
		})
	}
}
