package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// With logFormat json, every line is one JSON object with time, level, msg and component, then
// With's pairs and the call's.
func TestLoggerWritesJSONLines(t *testing.T) {
	// The node's zone must not show: every line's time is UTC.
	local := time.Local
	time.Local = time.FixedZone("UTC+5", 5*3600)
	t.Cleanup(func() { time.Local = local })
	var buf bytes.Buffer
	l := newLogger(&buf, logging.Options{Format: logging.FormatJSON}).With("cmd", "ADD", "network", "n\"1")
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
	if info["level"] != "INFO" || info["msg"] != "done" || info["component"] != logging.ComponentCNI || info["cmd"] != "ADD" || info["network"] != "n\"1" ||
		info["socket"] != "/run/x.sock" || info["n"] != 3.0 {
		t.Errorf("info line %v", info)
	}
	if failed["level"] != "ERROR" || failed["err"] != "boom\nagain" || failed["cmd"] != "ADD" {
		t.Errorf("error line %v", failed)
	}
	if ts, err := time.Parse(time.RFC3339Nano, info["time"].(string)); err != nil || time.Since(ts) > time.Minute ||
		!strings.HasSuffix(info["time"].(string), "Z") {
		t.Errorf("time %v: %v", info["time"], err)
	}
}

// The log is rotated at MaxLogSize into one old file: it takes at most about twice that.
func TestLogIsRotated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cni.log")
	p := &Plugin{Stderr: io.Discard, MaxLogSize: 1000}
	for i := range 100 {
		l, closeLog := p.openLog(path, logging.Options{})
		l.Info("a line of about a hundred bytes", "i", i, "pad", "xxxxxxxxxxxxxxxxxxxxxxxx")
		closeLog()
	}
	cur, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.Stat(path + ".1")
	if err != nil {
		t.Fatalf("no rotated file: %v", err)
	}
	if cur.Size() > 1200 || old.Size() > 1200 {
		t.Fatalf("log %d bytes, rotated %d bytes; want each at most about 1000", cur.Size(), old.Size())
	}
	if files, _ := filepath.Glob(path + "*"); len(files) != 2 {
		t.Fatalf("log files %v, want the log and one old file", files)
	}
}

// By default (no logFormat) the log is key=value text, as the other binaries': a whole ADD
// through the fake OVSDB logs lines that parse, each naming the component, and its result's
// line names the pod and the attachment by the common keys. Stdout carries the result alone.
func TestAddLogsTextWithTheCommonKeys(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	err = n.p.Add(n.args)
	os.Stdout = stdout
	w.Close()
	printed, _ := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(printed) {
		t.Errorf("stdout is not the result alone:\n%s", printed)
	}
	raw, err := os.ReadFile(n.logFile())
	if err != nil {
		t.Fatal(err)
	}
	lines, err := logtest.Parse(string(raw), logging.FormatText, logging.ComponentCNI)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cmd": "ADD", logging.KeyContainerID: "c1", logging.KeyIfname: "net1", logging.KeyPort: "",
		logging.KeyNamespace: "ns", logging.KeyPod: "web-0"}
	if _, ok := logtest.Find(lines, "done", want); !ok {
		t.Fatalf("no ADD result with %v:\n%s", want, raw)
	}
}
