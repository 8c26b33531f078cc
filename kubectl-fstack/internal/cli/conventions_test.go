package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Usage lines say how a kubectl user runs the plugin.
func TestUsageSaysKubectlFstack(t *testing.T) {
	out, _, code := run(t, "render", "--help")
	if code != 0 || !strings.Contains(out, "\n  kubectl fstack render -f stack.yaml") {
		t.Errorf("render --help (exit %d) lacks the usage line `kubectl fstack render -f ...`:\n%s", code, out)
	}
	if out, _, _ := run(t, "--help"); !strings.Contains(out, "kubectl fstack [command]") {
		t.Errorf("--help lacks `kubectl fstack [command]`:\n%s", out)
	}
}

// -f as kubectl's: repeatable, a directory's manifests, its subdirectories with -R only, and a
// file named explicitly whatever its extension.
func TestFilenameFlagsAsKubectl(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, from string) {
		t.Helper()
		raw, err := os.ReadFile(sample(t, from))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("apps/nginx.yaml", "workloads/nginx-vhost.yaml")
	write("apps/more/nginx.yml", "workloads/nginx-vhost.yaml")
	write("apps/README.txt", "workloads/nginx-vhost.yaml") // not a manifest's extension: skipped
	write("stacks/stack.manifest", "vhost-user.yaml")

	deployments := func(out string) int { return strings.Count(out, "\nkind: Deployment") }
	stack := filepath.Join(dir, "stacks/stack.manifest")
	out, errOut, code := run(t, "inject", "-f", filepath.Join(dir, "apps"), "--stack", stack)
	if code != 0 || deployments(out) != 1 {
		t.Errorf("-f DIR: want the one Deployment of apps/ (not more/, not README.txt), got exit %d, %d: %s", code, deployments(out), errOut)
	}
	out, errOut, code = run(t, "inject", "-R", "-f", filepath.Join(dir, "apps"), "--stack", stack)
	if code != 0 || deployments(out) != 2 {
		t.Errorf("-R -f DIR: want both Deployments, got exit %d, %d: %s", code, deployments(out), errOut)
	}
	out, errOut, code = run(t, "inject", "-f", filepath.Join(dir, "apps/nginx.yaml"), "-f", filepath.Join(dir, "apps/more/nginx.yml"), "--stack", stack)
	if code != 0 || deployments(out) != 2 {
		t.Errorf("-f A -f B: want both Deployments, got exit %d, %d: %s", code, deployments(out), errOut)
	}
	// render: the StackInstance among the files of a directory, read whatever the file is called
	// when named, found in a directory only by a manifest's extension.
	if _, errOut, code := run(t, "render", "-f", filepath.Join(dir, "stacks/stack.manifest"), "-f", filepath.Join(dir, "apps"), "--cpus", "2-3"); code != 0 {
		t.Errorf("render -f FILE -f DIR: exit %d: %s", code, errOut)
	}
	if _, errOut, code := run(t, "render", "-f", filepath.Join(dir, "stacks")); code == 0 || !strings.Contains(errOut, "no .json, .yaml or .yml file") {
		t.Errorf("render -f DIR without a manifest: want the error saying so, got exit %d: %s", code, errOut)
	}
	if _, errOut, code := run(t, "render", "-f", filepath.Join(dir, "apps")); code == 0 || !strings.Contains(errOut, "no StackInstance") {
		t.Errorf("render -f DIR without a StackInstance: want the error saying so, got exit %d: %s", code, errOut)
	}
}
