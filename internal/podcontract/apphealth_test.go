package podcontract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAppBrokenMarker(t *testing.T) {
	shim := t.TempDir()
	if _, broken, err := ReadAppBroken(shim, "nginx"); broken || err != nil {
		t.Fatalf("no marker: broken %v, err %v", broken, err)
	}
	if err := ClearAppBroken(shim, "nginx"); err != nil {
		t.Fatalf("clearing no marker: %v", err)
	}
	if err := WriteAppBroken(shim, "nginx", "0 of 1 workers\nup"); err != nil {
		t.Fatal(err)
	}
	if why, broken, err := ReadAppBroken(shim, "nginx"); !broken || err != nil || why != "0 of 1 workers up" {
		t.Fatalf("marker: %q %v %v, want the reason on one line", why, broken, err)
	}
	if _, broken, _ := ReadAppBroken(shim, "web"); broken {
		t.Fatal("another container's marker was read")
	}
	if err := ClearAppBroken(shim, "nginx"); err != nil {
		t.Fatal(err)
	}
	if _, broken, err := ReadAppBroken(shim, "nginx"); broken || err != nil {
		t.Fatalf("after clearing: broken %v, err %v", broken, err)
	}
}

// The pod can write the shim volume: whatever it plants is read bounded, never through a
// symlink, and comes back printable.
func TestAppBrokenMarkerIsReadAsHostile(t *testing.T) {
	shim := t.TempDir()
	dir := filepath.Join(shim, AppBrokenDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("\x1b[31mred\r\nX: y\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	if why, broken, err := ReadAppBroken(shim, "a"); !broken || err != nil || why != " [31mred  X: y " {
		t.Fatalf("control bytes: %q %v %v", why, broken, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), []byte(strings.Repeat("x", AppBrokenMax+2)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadAppBroken(shim, "big"); err == nil {
		t.Fatal("a marker larger than the bound was read")
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadAppBroken(shim, "link"); err == nil {
		t.Fatal("a symlinked marker was followed")
	}
	if err := os.Rename(dir, dir+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir+".real", dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadAppBroken(shim, "a"); err == nil {
		t.Fatal("a symlinked marker directory was followed")
	}
	if err := WriteAppBroken(shim, "a", "x"); err == nil {
		t.Fatal("a marker was written through a symlinked directory")
	}
	for _, name := range []string{"", "..", "a/b"} {
		if _, _, err := ReadAppBroken(shim, name); err == nil {
			t.Errorf("container name %q was accepted", name)
		}
	}
}

func TestAppBrokenReasonIsBounded(t *testing.T) {
	shim := t.TempDir()
	if err := WriteAppBroken(shim, "b", strings.Repeat("y", 2*AppBrokenMax)); err != nil {
		t.Fatal(err)
	}
	if why, broken, err := ReadAppBroken(shim, "b"); !broken || err != nil || len(why) != AppBrokenMax {
		t.Fatalf("a long reason: %d bytes, %v, %v; want it cut to %d", len(why), broken, err, AppBrokenMax)
	}
}
