package supervisor

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// /config answers what the generation runs: the config.ini the supervisor wrote (byte for byte),
// the EAL argv of each process and the shim's mode; 503 before the first render. The CLI's reader
// decodes the answer.
func TestConfigAnswersWhatRuns(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	h.writeDevinfo()
	s := h.supervisor("primary", "secondary")
	if code, body := get(t, s.handler(), podcontract.ConfigPath); code != http.StatusServiceUnavailable {
		t.Fatalf("/config before any render: %d %s, want 503", code, body)
	}
	if _, _, err := s.render(); err != nil {
		t.Fatal(err)
	}
	mustDo(t, os.WriteFile(filepath.Join(h.paths.ShimDir, podcontract.GenerationFile), []byte("4\n"), 0o644))
	code, body := get(t, s.handler(), podcontract.ConfigPath)
	if code != http.StatusOK {
		t.Fatalf("/config %d: %s", code, body)
	}
	rc, err := podcontract.ReadRunningConfig(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(h.paths.ConfigFile)
	mustDo(t, err)
	if rc.ConfigINI != string(written) || !strings.Contains(rc.ConfigINI, "[port0]") {
		t.Errorf("/config's configINI is not the config.ini written:\n%s\n---\n%s", rc.ConfigINI, written)
	}
	if rc.Generation != 4 || len(rc.EAL) != 2 || !strings.Contains(strings.Join(rc.EAL[1], " "), "--proc-type=secondary") || rc.ShimMode == "" {
		raw, _ := json.Marshal(rc)
		t.Errorf("/config: %s", raw)
	}
}
