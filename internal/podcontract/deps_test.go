package podcontract

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedDeps are the only packages outside the standard library podcontract may pull in:
// fstack-cni and fstack-launcher import it and start once per CNI call or container start, so a
// Kubernetes client library here would cost every one of them its init time and size.
var allowedDeps = map[string]bool{
	"github.com/kube-fstack/kube-fstack/internal/podcontract": true,
	"github.com/kube-fstack/kube-fstack/internal/fsutil":      true,
}

func TestImportsOnlyTheStandardLibraryXSysAndFsutil(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test lists podcontract's imports with the go tool, which is not on PATH: %v (export PATH=/usr/local/go/bin:$PATH)", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var seen []string
	for _, pkg := range strings.Fields(string(out)) {
		seen = append(seen, pkg)
		if !allowedDeps[pkg] && !strings.HasPrefix(pkg, "golang.org/x/sys/") {
			t.Errorf("podcontract depends on %s: keep it to the standard library, golang.org/x/sys and internal/fsutil (it is in fstack-cni and fstack-launcher)", pkg)
		}
	}
	if len(seen) < 2 {
		t.Fatalf("go list -deps listed %q, expected at least podcontract and fsutil: the listing is not what this test reads", seen)
	}
}
