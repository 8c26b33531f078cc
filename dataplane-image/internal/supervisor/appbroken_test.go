package supervisor

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// An Nginx master without workers under the multi-SC shim still completes the handshake of a
// tcpSocket probe through F-Stack (here: the fake agent connects). The app's probes fail while
// its launcher marks it broken, for that container only, and pass again once the marker goes.
func TestAppProbesFailWhileTheLauncherSaysTheAppCannotServe(t *testing.T) {
	state := t.TempDir()
	mustDo(t, os.Mkdir(filepath.Join(state, "app"), 0o755))
	bin := filepath.Join(t.TempDir(), "agent")
	mustDo(t, os.WriteFile(bin, []byte(fakeAgent), 0o755))
	probes := `{"/app-probe/app/liveness":{"port":80,"timeoutSeconds":1},"/app-probe/app/readiness":{"port":80,"timeoutSeconds":1},` +
		`"/app-probe/other/liveness":{"port":80,"timeoutSeconds":1}}`
	s := New(Config{AppProbes: probes, Paths: facts.Paths{ShimDir: t.TempDir(), AppStateDir: state}, NodeIPs: testNode}, nil, io.Discard)
	s.health.ready.Store(true)
	t.Cleanup(s.app.Stop)
	// The supervisor attaches the agent before ready (its first attach takes the fake 1.2 s).
	if err := s.app.Start(context.Background(), bin, nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	srv := s.handler()
	expect := func(path string, code int, body string) {
		t.Helper()
		if c, b := get(t, srv, path); c != code || !strings.Contains(b, body) {
			t.Errorf("%s = %d %q, want %d with %q", path, c, b, code, body)
		}
	}
	expect("/app-probe/app/liveness", http.StatusOK, "tcp port 80: connected")

	why := "nginx has had 0 of its 1 workers up for 3s (workers seen to die meanwhile: 9): it cannot serve"
	mustDo(t, podcontract.WriteAppBroken(filepath.Join(state, "app"), why))
	expect("/app-probe/app/liveness", http.StatusServiceUnavailable, "the app's launcher reports that it cannot serve: "+why)
	expect("/app-probe/app/readiness", http.StatusServiceUnavailable, why)
	expect("/app-probe/other/liveness", http.StatusOK, "connected")

	mustDo(t, podcontract.ClearAppBroken(filepath.Join(state, "app")))
	expect("/app-probe/app/liveness", http.StatusOK, "connected")

	// The app container writes its directory: a symlink there is not followed, and fails the probe.
	mustDo(t, os.Symlink("/etc/hostname", filepath.Join(state, "app", podcontract.AppBrokenFile)))
	expect("/app-probe/app/liveness", http.StatusServiceUnavailable, "cannot be read")
}
