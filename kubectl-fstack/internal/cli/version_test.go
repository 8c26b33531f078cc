package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With no cluster, version prints the plugin's part and says why the cluster's is missing, with
// exit status 1 as kubectl version does; --client asks no cluster and succeeds.
func TestVersionWithoutCluster(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	out, errOut, code := run(t, "version", "--kubeconfig", missing)
	if code != 1 || !strings.Contains(errOut, "kubeconfig") {
		t.Errorf("exit %d, stderr %q; want 1 naming the kubeconfig", code, errOut)
	}
	for _, want := range []string{"Plugin version: dev\n", "F-Stack commit: " + PinnedFStackCommit, "Operator: unknown (the cluster could not be asked)"} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	out, errOut, code = run(t, "version", "--client", "-o", "json", "--kubeconfig", missing)
	if code != 0 {
		t.Fatalf("version --client: exit %d: %s", code, errOut)
	}
	var v VersionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if v.Kind != "VersionInfo" || v.Plugin != "dev" || v.FStackCommit != PinnedFStackCommit || v.ClusterError != "" || v.Operators == nil {
		t.Errorf("version --client -o json: %+v", v)
	}
	if _, errOut, code := run(t, "version", "-o", "wide", "--client"); code != 1 || !strings.Contains(errOut, "version has no table") {
		t.Errorf("version -o wide: exit %d, %q", code, errOut)
	}
}

// The operator's version is its Deployment's container image (what runs), the dataplane image
// the operator's --dataplane-image (the default when absent).
func TestOperatorVersions(t *testing.T) {
	dep := func(ns, name string, c ...corev1.Container) appsv1.Deployment {
		d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/version": "0.3.0"}}}
		d.Spec.Template.Spec.Containers = c
		return d
	}
	got := operatorVersions([]appsv1.Deployment{
		dep("z", "plain", corev1.Container{Name: "manager", Image: "example/op:1"}),
		dep("kube-fstack", "kube-fstack-operator",
			corev1.Container{Name: "proxy", Image: "example/proxy:9"},
			corev1.Container{Name: "operator", Image: "example/kube-fstack-operator:v0.3.0",
				Args: []string{"--leader-elect=true", "--dataplane-image=example/dataplane:v0.3.0"}}),
	})
	if len(got) != 2 || got[0].Image != "example/kube-fstack-operator:v0.3.0" || got[0].DataplaneImage != "example/dataplane:v0.3.0" ||
		got[0].ChartVersion != "0.3.0" || got[1].Image != "example/op:1" || !strings.HasSuffix(got[1].DataplaneImage, "(the operator's default)") {
		t.Errorf("operatorVersions = %+v", got)
	}
}

// The F-Stack commit the plugin names is the one the dataplane image is built from.
func TestPinnedFStackCommitMatchesBuild(t *testing.T) {
	raw, err := os.ReadFile("../../../dataplane-image/build/build-fstack.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`FSTACK_COMMIT=\$\{FSTACK_COMMIT:-([0-9a-f]{40})\}`).FindSubmatch(raw)
	if m == nil || string(m[1]) != PinnedFStackCommit {
		t.Errorf("build-fstack.sh pins %q, PinnedFStackCommit is %s: change both together", m, PinnedFStackCommit)
	}
}

// A plugin built as hack/krew-release.sh builds it injects the dataplane image of its own release
// (IMAGE_REPO/dataplane:VERSION), not the local dev build: the test builds the binary with the
// script's own -ldflags, expanded by bash, because -X of a misspelt symbol is silently ignored.
// A dev build keeps the local image.
func TestReleasedPluginInjectsTheReleasesImage(t *testing.T) {
	if got := DefaultDataplaneImage(); got != "localhost/kube-fstack/dataplane:dev" {
		t.Errorf("a dev build's default image is %q, want the local build localhost/kube-fstack/dataplane:dev", got)
	}
	if out := injectWithReleaseBuild(t, "version=v9.8.7", "IMAGE_REPO=registry.example/kfs"); !strings.Contains(out, "image: registry.example/kfs/dataplane:v9.8.7") {
		t.Errorf("the released plugin does not inject its release's image:\n%s", out)
	}
}

// A release that built the dataplane image passes its digest (DATAPLANE_DIGEST): the released
// plugin injects IMAGE_REPO/dataplane@DIGEST, the exact image the release signed, not a tag that
// can be moved to another image.
func TestReleasedPluginInjectsTheDataplaneByDigest(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	out := injectWithReleaseBuild(t, "version=v9.8.7", "IMAGE_REPO=registry.example/kfs", "DATAPLANE_DIGEST="+digest)
	if !strings.Contains(out, "image: registry.example/kfs/dataplane@"+digest+"\n") {
		t.Errorf("the released plugin does not inject the release's dataplane image by digest:\n%s", out)
	}
}

// injectWithReleaseBuild builds the plugin with hack/krew-release.sh's own -ldflags, expanded by
// bash with env (its variables), and returns what its inject prints for the vhost-user sample.
func injectWithReleaseBuild(t *testing.T, env ...string) string {
	t.Helper()
	script, err := os.ReadFile("../../../hack/krew-release.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-ldflags="([^"]*)"`).FindSubmatch(script)
	if m == nil {
		t.Fatal("hack/krew-release.sh has no -ldflags=\"...\"")
	}
	expand := exec.Command("bash", "-c", `printf '%s' "`+string(m[1])+`"`)
	expand.Env = append(os.Environ(), env...)
	ldflags, err := expand.Output()
	if err != nil {
		t.Fatalf("expand the script's ldflags: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "kubectl-fstack")
	build := exec.Command("go", "build", "-ldflags="+string(ldflags), "-o", bin, "../../cmd/kubectl-fstack")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags=%q: %v\n%s", ldflags, err, out)
	}
	cmd := exec.Command(bin, "inject", "-f", "../../../config/samples/workloads/nginx-vhost.yaml", "--stack", "../../../config/samples/vhost-user.yaml")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inject: %v\n%s", err, stderr.String())
	}
	return string(out)
}
