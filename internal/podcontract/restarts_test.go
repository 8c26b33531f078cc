package podcontract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The launcher's record round-trips, and goes on counting from what it wrote.
func TestAppRestartsRecord(t *testing.T) {
	root, own := stateDirs(t, "nginx")
	if r, err := ReadAppRestarts(root, "nginx"); r != nil || err != nil {
		t.Fatalf("no record: %+v %v", r, err)
	}
	r, err := ReadOwnAppRestarts(own)
	if err != nil || r.Total != 0 {
		t.Fatalf("own record before any: %+v %v", r, err)
	}
	r.Add(AppRestartExited, "the app exited: exit status 3", time.Unix(100, 0))
	r.Add(AppRestartReload, "nginx reloaded\n(SIGHUP)", time.Unix(200, 0))
	if err := WriteAppRestarts(own, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAppRestarts(root, "nginx")
	if err != nil || got.Total != 2 || got.ByReason[AppRestartExited] != 1 || got.ByReason[AppRestartReload] != 1 ||
		got.Last.Reason != AppRestartReload || got.Last.Message != "nginx reloaded (SIGHUP)" || !got.Last.Time.Equal(time.Unix(200, 0)) {
		t.Fatalf("read back %+v (last %+v), %v", got, got.Last, err)
	}
}

// What an app container writes is read as hostile: bounded, beneath the volume, no symlink,
// counts that add up to what the reasons say, reasons of the closed set.
func TestAppRestartsRecordIsReadAsHostile(t *testing.T) {
	root := t.TempDir()
	plant := func(container, data string) {
		mustMkdir(t, filepath.Join(root, container))
		if err := os.WriteFile(filepath.Join(root, container, AppRestartsFile), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plant("liar", `{"total":1000000,"byReason":{"exited":2,"weird\u0000label":3,"broken":-7}}`)
	r, err := ReadAppRestarts(root, "liar")
	if err != nil || r.Total != 5 || r.ByReason[AppRestartExited] != 2 || r.ByReason[RestartOther] != 3 || len(r.ByReason) != 2 {
		t.Fatalf("a lying record read as %+v, %v", r, err)
	}
	plant("huge", `{"byReason":{"exited":9223372036854775807,"broken":9223372036854775807}}`)
	if r, err := ReadAppRestarts(root, "huge"); err != nil || r.Total <= 0 {
		t.Fatalf("counts at the int limit wrapped: %+v %v", r, err)
	}
	plant("big", strings.Repeat(" ", AppRestartsMax+1)+"{}")
	if _, err := ReadAppRestarts(root, "big"); err == nil {
		t.Error("a record over the bound was read")
	}
	plant("junk", "not json")
	if _, err := ReadAppRestarts(root, "junk"); err == nil {
		t.Error("junk was read as a record")
	}
	mustMkdir(t, filepath.Join(root, "link"))
	if err := os.Symlink("/etc/hostname", filepath.Join(root, "link", AppRestartsFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAppRestarts(root, "link"); err == nil {
		t.Error("a symlinked record was followed")
	}
	if _, err := ReadAppRestarts(root, "../x"); err == nil {
		t.Error("a container name with a slash was accepted")
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
