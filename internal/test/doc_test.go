package test

import (
	"os/exec"
	"strings"
	"testing"
)

// The product binaries, as the Makefile and the image recipes build them.
var binaries = []string{
	"./kubectl-fstack/cmd/kubectl-fstack",
	"./operator/cmd/fstack-operator",
	"./cni/cmd/fstack-cni",
	"./cni/cmd/fstack-cni-installer",
	"./dataplane-image/cmd/fstack-supervisor",
	"./dataplane-image/cmd/fstack-launcher",
}

// Test support sits under internal/test so that its role shows in the path; this keeps the path
// honest: a binary that links a package from here ships test code.
func TestNoBinaryLinksTestSupport(t *testing.T) {
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, binaries...)
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "/kube-fstack/internal/test/") || strings.HasSuffix(p, "/kube-fstack/internal/test") {
			t.Errorf("a product binary links %s: test support must stay out of binaries (move what it needs out of internal/test)", p)
		}
	}
}
