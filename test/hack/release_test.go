package hack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RELEASE_PUSH_INCOMPLETE_CHART lets make test-release push a chart naming images it did not build;
// release.sh must refuse it for any registry but a plain-HTTP one on loopback, before doing anything.
func TestReleaseRefusesAnIncompleteChartPushToARealRegistry(t *testing.T) {
	root := repoRoot(t)
	for _, reg := range []string{"oci://registry.example.com/charts", "oci://127.0.0.1.example.com/charts", "oci://127.0.0.1:5000/charts"} {
		plain := "1"
		if reg == "oci://127.0.0.1:5000/charts" {
			plain = "" // loopback, but over TLS: not the test's registry either
		}
		cmd := exec.Command(filepath.Join(root, "hack", "release.sh"), "chart", "v1.2.3")
		// HELM only has to exist: the check comes before any tool runs.
		cmd.Env = append(os.Environ(), "HELM=/bin/true", "OUT="+t.TempDir(), "REGISTRY="+reg,
			"REGISTRY_PLAIN_HTTP="+plain, "RELEASE_PUSH_INCOMPLETE_CHART=1")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "RELEASE_PUSH_INCOMPLETE_CHART=1 is for a test registry on this machine only") {
			t.Errorf("REGISTRY=%s REGISTRY_PLAIN_HTTP=%q: %v, want the knob refused:\n%s", reg, plain, err, out)
		}
	}
}
