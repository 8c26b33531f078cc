package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubeconfigFor writes a kubeconfig whose one cluster is server.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config")
	raw := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `", insecure-skip-tls-verify: true}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {token: t}}]
`
	if err := os.WriteFile(p, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// doctor's exit status 2 is "could not look": no API server, one that does not answer in time,
// no kubeconfig, a wrong invocation. A CI gate tells them from problems found (1). The codes a
// real API server gives (0, 1, and 2 for RBAC) are kubectl-fstack/test/envtest's.
func TestDoctorCouldNotLookExits2(t *testing.T) {
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer slow.Close()
	for name, args := range map[string][]string{
		"no API server":           {"doctor", "--kubeconfig", kubeconfigFor(t, "https://127.0.0.1:1")},
		"a timeout":               {"doctor", "--kubeconfig", kubeconfigFor(t, slow.URL), "--request-timeout", "1s"},
		"no kubeconfig":           {"doctor", "--kubeconfig", filepath.Join(t.TempDir(), "missing")},
		"an unknown flag":         {"doctor", "--no-such-flag"},
		"two nodes":               {"doctor", "--kubeconfig", kubeconfigFor(t, "https://127.0.0.1:1"), "a", "b"},
		"an output format":        {"doctor", "--kubeconfig", kubeconfigFor(t, "https://127.0.0.1:1"), "-o", "table"},
		"a named node, no server": {"doctor", "--kubeconfig", kubeconfigFor(t, "https://127.0.0.1:1"), "node-a"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := run(t, args...)
			if code != 2 || !strings.HasPrefix(errOut, "error: ") || out != "" {
				t.Errorf("exit %d, want 2\nstdout: %s\nstderr: %s", code, out, errOut)
			}
		})
	}
}

// Problems found are exit status 1, and nothing else is.
func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errReported, 1},
		{os.ErrNotExist, 1},
		{couldNotLook(os.ErrNotExist), 2},
		{couldNotLook(nil), 0},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	r := &DoctorReport{Problems: []string{"a stack cannot run"}}
	if got := exitCode(r.writeVerdict(&strings.Builder{})); got != 1 {
		t.Errorf("a report with problems exits %d, want 1", got)
	}
	if got := exitCode((&DoctorReport{SetupNotes: []string{"may not list DaemonSets"}}).writeVerdict(&strings.Builder{})); got != 0 {
		t.Errorf("a report with warnings only exits %d, want 0", got)
	}
}
