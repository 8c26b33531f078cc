package nodeconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Parse takes only a well-formed node config: absolute clean paths, namespace names once, no
// unknown member; what it leaves out is the default.
func TestParse(t *testing.T) {
	c, err := Parse([]byte(`{"logFile":"/l/x.log","namespaces":["web","a-1"]}`))
	if err != nil || c.LogFile != "/l/x.log" || c.SocketRoot != DefaultSocketRoot || !c.Serves("web") || c.Serves("") || c.Serves("db") {
		t.Fatalf("%+v %v", c, err)
	}
	for in, want := range map[string]string{
		`{"logFile":"rel.log"}`:                              "logFile",
		`{"socketRoot":"/a/../etc"}`:                         "socketRoot",
		`{"deviceInfoDir":"/d/"}`:                            "deviceInfoDir",
		`{"namespaces":["../x"]}`:                            "namespaces[0]",
		`{"namespaces":["Web"]}`:                             "namespaces[0]",
		`{"namespaces":["a","a"]}`:                           "listed twice",
		`{"namespaces":["-a"]}`:                              "namespaces[0]",
		`{"namespaces":["` + strings.Repeat("a", 64) + `"]}`: "namespaces[0]",
		`{"logPath":"/x"}`:                                   "unknown field",
		`{} {}`:                                              "more than one",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming %s", in, err, want)
		}
	}
}

// Load reports a missing file as ErrMissing and refuses one over MaxSize.
func TestLoadMissingAndLarge(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cni.json")
	if _, err := Load(path, os.Getuid()); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "no", "cni.json"), os.Getuid()); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing directory: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"namespaces":[`+strings.Repeat(`"a",`, MaxSize/4)+`"b"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, os.Getuid()); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a large file: %v", err)
	}
}
