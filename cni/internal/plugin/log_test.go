package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// Every line is one JSON object with time, level and msg, then With's pairs and the call's.
func TestLoggerWritesJSONLines(t *testing.T) {
	var buf bytes.Buffer
	l := (&logger{w: &buf}).With("cmd", "ADD", "network", "n\"1")
	l.Info("done", "socket", "/run/x.sock", "n", 3)
	l.Error("failed", "err", errors.New("boom\nagain"))
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("wrote %q", buf.String())
	}
	var info, failed map[string]any
	if err := json.Unmarshal(lines[0], &info); err != nil {
		t.Fatalf("%s: %v", lines[0], err)
	}
	if err := json.Unmarshal(lines[1], &failed); err != nil {
		t.Fatalf("%s: %v", lines[1], err)
	}
	if info["level"] != "INFO" || info["msg"] != "done" || info["cmd"] != "ADD" || info["network"] != "n\"1" ||
		info["socket"] != "/run/x.sock" || info["n"] != 3.0 {
		t.Errorf("info line %v", info)
	}
	if failed["level"] != "ERROR" || failed["err"] != "boom\nagain" || failed["cmd"] != "ADD" {
		t.Errorf("error line %v", failed)
	}
	if ts, err := time.Parse(time.RFC3339Nano, info["time"].(string)); err != nil || time.Since(ts) > time.Minute {
		t.Errorf("time %v: %v", info["time"], err)
	}
}
