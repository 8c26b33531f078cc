package chart

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The packaged chart's test version and image repository: neither is the tree's, so the test
// sees that make release sets them rather than the tree's Chart.yaml and values.yaml.
const (
	releaseVersion   = "v9.8.7-rc.1"
	releaseImageRepo = "registry.example/kube-fstack"
)

// packageChart is the chart as `make release` packages it (hack/release.sh chart: no images,
// no root), in a temporary directory; it returns the .tgz.
func packageChart(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack", "release.sh"), "chart", releaseVersion)
	cmd.Env = append(os.Environ(), "HELM="+mustAbs(t, helmBin(t)), "OUT="+out, "IMAGE_REPO="+releaseImageRepo, "REGISTRY=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/release.sh chart %s: %v\n%s", releaseVersion, err, stderr.String())
	}
	tgz := strings.TrimSpace(stdout.String())
	if filepath.Base(tgz) != "kube-fstack-"+strings.TrimPrefix(releaseVersion, "v")+".tgz" {
		t.Fatalf("hack/release.sh chart printed %q, want the path of kube-fstack-%s.tgz", tgz, strings.TrimPrefix(releaseVersion, "v"))
	}
	return tgz
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// localImages rewrites the packaged chart's image defaults, and nothing else, to the images the
// local cluster builds (hack/cluster/values.yaml names the same ones).
var localImages = []string{
	"operator.image.repository=localhost/kube-fstack/operator", "operator.image.tag=dev",
	"cni.image.repository=localhost/kube-fstack/cni", "cni.image.tag=dev",
	"dataplane.image.repository=localhost/kube-fstack/dataplane-standin", "dataplane.image.tag=dev",
}

// TestPackagedChart: the package make release makes carries the release's version, appVersion
// and the metadata a chart registry shows, and its defaults name the release's three images.
func TestPackagedChart(t *testing.T) {
	tgz := packageChart(t)
	out, stderr, err := helm(t, "show", "chart", tgz)
	if err != nil {
		t.Fatalf("helm show chart: %v\n%s", err, stderr)
	}
	m := readChartMeta(t, []byte(out))
	if m.Version != strings.TrimPrefix(releaseVersion, "v") || m.AppVersion != releaseVersion {
		t.Errorf("packaged version %q appVersion %q, want %q and %q", m.Version, m.AppVersion, strings.TrimPrefix(releaseVersion, "v"), releaseVersion)
	}
	if m.Home == "" || len(m.Sources) == 0 || len(m.Maintainers) == 0 || len(m.Keywords) == 0 {
		t.Errorf("Chart.yaml lacks what a chart registry shows (home, sources, maintainers, keywords):\n%s", out)
	}
	out, stderr, err = helm(t, "show", "values", tgz)
	if err != nil {
		t.Fatalf("helm show values: %v\n%s", err, stderr)
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(out), &values); err != nil {
		t.Fatal(err)
	}
	for _, comp := range imageSets {
		section, _ := values[comp].(map[string]any)
		img, _ := section["image"].(map[string]any)
		if img["repository"] != releaseImageRepo+"/"+comp || img["tag"] != "" || img["digest"] != "" {
			t.Errorf("packaged %s.image = %v, want repository %s/%s, tag and digest empty (the appVersion names the image)", comp, img, releaseImageRepo, comp)
		}
	}
	out, stderr, err = helm(t, "template", release, tgz, "--namespace", namespace, "--kube-version", kubeVersion)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", tgz, err, stderr)
	}
	want := map[string]string{}
	for _, comp := range imageSets {
		want[comp] = releaseImageRepo + "/" + comp + ":" + releaseVersion
	}
	wantImages(t, renderedImages(t, objects(t, out)), want)
}

// testPackagedInstall (TestAPIServer, after the tree's chart is uninstalled): the packaged chart
// installs with its own defaults, only its images rewritten to the local ones, and every object
// it renders is in the API server.
func testPackagedInstall(t *testing.T, c client.Client, kubeconfig string) {
	tgz := packageChart(t)
	args := []string{"--namespace", namespace}
	for _, s := range localImages {
		args = append(args, "--set", s)
	}
	out, stderr, err := helm(t, append([]string{"install", release, tgz, "--kubeconfig", kubeconfig, "--create-namespace"}, args...)...)
	if err != nil {
		t.Fatalf("helm install %s: %v\n%s%s", tgz, err, out, stderr)
	}
	rendered, stderr, err := helm(t, append([]string{"template", release, tgz, "--kube-version", kubeVersion}, args...)...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", tgz, err, stderr)
	}
	objs := objects(t, rendered)
	wantImages(t, renderedImages(t, objs), map[string]string{
		"operator":  "localhost/kube-fstack/operator:dev",
		"cni":       "localhost/kube-fstack/cni:dev",
		"dataplane": "localhost/kube-fstack/dataplane-standin:dev",
	})
	ctx := context.Background()
	n := 0
	for _, o := range objs {
		if _, hook := o.GetAnnotations()["helm.sh/hook"]; hook {
			continue
		}
		got := o.NewEmptyInstance().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("%s %s after helm install of the package: %v", o.GetKind(), o.GetName(), err)
			continue
		}
		if v := got.GetLabels()["app.kubernetes.io/version"]; v != releaseVersion {
			t.Errorf("%s %s is labelled version %q, want the package's %q", o.GetKind(), o.GetName(), v, releaseVersion)
		}
		n++
	}
	if n == 0 {
		t.Fatal("the packaged chart rendered no objects")
	}
}
