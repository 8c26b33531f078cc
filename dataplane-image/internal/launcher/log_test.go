package launcher

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// logLines parses the launcher's log in the default format: every line must parse and name
// the component.
func logLines(t *testing.T, out string) []logtest.Line {
	t.Helper()
	if out == "" {
		return nil
	}
	lines, err := logtest.Parse(out, logging.FormatText, logging.ComponentLauncher)
	if err != nil {
		t.Fatalf("the launcher's log: %v", err)
	}
	return lines
}

// readable is the log as a person reads it (logtest.Readable), once every line has parsed as
// the launcher's: tests look for what a message says in it.
func readable(t *testing.T, out string) string {
	t.Helper()
	logLines(t, out)
	return logtest.Readable(out)
}

// Run, as far as a refusal, in both formats: the lines parse, name the component and the
// container, and the refusal keeps its instruction in err.
func TestLogIsStructuredInBothFormats(t *testing.T) {
	for _, format := range []string{logging.FormatText, logging.FormatJSON} {
		t.Run(format, func(t *testing.T) {
			var log bytes.Buffer
			l := New()
			l.Container, l.StateDir, l.Log, l.Logging = "web", t.TempDir()+"/missing", &log, logging.Options{Format: format}
			if code := l.Run(context.Background(), []string{"true"}); code != ExitConfig {
				t.Fatalf("exit %d", code)
			}
			lines, err := logtest.Parse(log.String(), format, logging.ComponentLauncher)
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			if _, ok := logtest.Find(lines, "not starting the app", map[string]string{logging.KeyContainer: "web", logging.KeyErr: ""}); !ok {
				t.Fatalf("no refusal with container and err:\n%s", log.String())
			}
			if !strings.Contains(lines[0][logging.KeyErr], "has no "+podcontract.AppStateVolume+" volume") {
				t.Errorf("the instruction is lost: %v", lines[0])
			}
			if strings.Contains(log.String(), "fstack-launcher: ") {
				t.Errorf("a prefixed line is left:\n%s", log.String())
			}
		})
	}
}

// hasLine says whether the log has a line whose msg contains msg and whose keys have the
// values of kv (key, value pairs).
func hasLine(t *testing.T, out, msg string, kv ...string) bool {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		want[kv[i]] = kv[i+1]
	}
	_, ok := logtest.Find(logLines(t, out), msg, want)
	return ok
}
