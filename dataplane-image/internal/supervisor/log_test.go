package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// The run loop with fake F-Stack processes, in both formats: every line parses, names the
// component and the pod (from the downward-API files, one of them hostile), and a process's
// lines, its own output relayed and the supervisor's about it, carry its index and pid.
func TestLogIsStructuredInBothFormats(t *testing.T) {
	for _, format := range []string{logging.FormatText, logging.FormatJSON} {
		t.Run(format, func(t *testing.T) {
			h := newHarness(t, vhostSpec(2))
			h.writeDevinfo()
			writeDownwardAPI(t, h.paths.PodInfoDir, map[string]string{podcontract.PodInfoNamespace: "shop",
				podcontract.PodInfoName: "web-0", podcontract.PodInfoStack: "edge\nlevel=ERROR msg=forged"})
			h.logging = logging.Options{Format: format}
			s := h.supervisor("primary", "secondary")
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			res := run(s, ctx)
			eventually(t, "the ready marker", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
			stop()
			if err := waitResult(t, res); err != nil {
				t.Fatal(err)
			}
			lines, err := logtest.Parse(h.log.String(), format, logging.ComponentSupervisor)
			if err != nil {
				t.Fatalf("%v\n%s", err, h.log)
			}
			for _, l := range lines {
				if l[logging.KeyNamespace] != "shop" || l[logging.KeyPod] != "web-0" || l[logging.KeyStack] != "edge" {
					t.Fatalf("a line without the pod's identity (or with the forged rest of a label): %v", l)
				}
			}
			for _, w := range []struct {
				msg string
				kv  map[string]string
			}{
				{"fake primary pid", map[string]string{logging.KeyStream: "output", logging.KeyProcess: "0", logging.KeyPID: ""}},
				{"second line", map[string]string{logging.KeyStream: "output", logging.KeyProcess: "1", logging.KeyPID: ""}},
				{"process is up", map[string]string{logging.KeyProcess: "1", logging.KeyPID: ""}},
				{"ready", map[string]string{logging.KeyGeneration: "1"}},
				{"process stopped", map[string]string{logging.KeyProcess: "0", "status": "exit status 0"}},
			} {
				if _, ok := logtest.Find(lines, w.msg, w.kv); !ok {
					t.Errorf("no %q line with %v:\n%s", w.msg, w.kv, h.log)
				}
			}
			if strings.Contains(h.log.String(), "[proc ") || strings.Contains(h.log.String(), "[supervisor]") {
				t.Errorf("a prefixed line is left:\n%s", h.log)
			}
		})
	}
}

// writeDownwardAPI lays files out as the kubelet does in a downward-API volume: the data in a
// timestamped directory, ..data a link to it, and each file a link through ..data (the layout
// that lets the kubelet swap every file at once).
func writeDownwardAPI(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	data := "..2026_11_26_12_00_00.000000001"
	mustDo(t, os.MkdirAll(filepath.Join(dir, data), 0o755))
	mustDo(t, os.Symlink(data, filepath.Join(dir, "..data")))
	for name, v := range files {
		mustDo(t, os.WriteFile(filepath.Join(dir, data, name), []byte(v), 0o644))
		mustDo(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}
}
