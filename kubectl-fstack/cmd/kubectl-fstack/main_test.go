package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The release's version reaches `version` through the -X flag hack/krew-release.sh passes, and a
// link named kubectl_complete-fstack (what kubectl runs to complete `kubectl fstack`) answers
// completion requests: both through the built binary, as kubectl and a user run it.
func TestBuiltBinaryVersionAndKubectlCompletion(t *testing.T) {
	script, err := os.ReadFile("../../../hack/krew-release.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-X (\S+)=\$version`).FindSubmatch(script)
	if m == nil {
		t.Fatal("hack/krew-release.sh passes no -X ...=$version to go build")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubectl-fstack")
	build := exec.Command("go", "build", "-ldflags", "-X "+string(m[1])+"=v9.8.7", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--client").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Plugin version: v9.8.7\n") {
		t.Errorf("version --client: %v\n%s", err, out)
	}
	link := filepath.Join(dir, "kubectl_complete-fstack")
	if err := os.Symlink("kubectl-fstack", link); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(link, "stat").Output()
	if err != nil || !strings.HasPrefix(string(out), "status\t") || !strings.Contains(string(out), ":4\n") {
		t.Errorf("kubectl_complete-fstack stat: %v\n%s", err, out)
	}
}
