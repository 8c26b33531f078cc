package podcontract

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// stateDirs makes the app-state volume as the dataplane sees it and container's own directory
// in it, which is what that container mounts.
func stateDirs(t *testing.T, container string) (root, own string) {
	t.Helper()
	root = t.TempDir()
	own = filepath.Join(root, container)
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, own
}

func TestAppBrokenMarker(t *testing.T) {
	root, own := stateDirs(t, "nginx")
	if _, broken, err := ReadAppBroken(root, "nginx"); broken || err != nil {
		t.Fatalf("no marker: broken %v, err %v", broken, err)
	}
	if err := ClearAppBroken(own); err != nil {
		t.Fatalf("clearing no marker: %v", err)
	}
	if err := WriteAppBroken(own, "0 of 1 workers\nup"); err != nil {
		t.Fatal(err)
	}
	if why, broken, err := ReadAppBroken(root, "nginx"); !broken || err != nil || why != "0 of 1 workers up" {
		t.Fatalf("marker: %q %v %v, want the reason on one line", why, broken, err)
	}
	if _, broken, _ := ReadAppBroken(root, "web"); broken {
		t.Fatal("another container's marker was read")
	}
	if err := ClearAppBroken(own); err != nil {
		t.Fatal(err)
	}
	if _, broken, err := ReadAppBroken(root, "nginx"); broken || err != nil {
		t.Fatalf("after clearing: broken %v, err %v", broken, err)
	}
}

// The app container writes its own directory: whatever it plants is read bounded, never through
// a symlink or a FIFO, and comes back printable.
func TestAppBrokenMarkerIsReadAsHostile(t *testing.T) {
	root := t.TempDir()
	plant := func(container string, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, container), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, container, AppBrokenFile), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plant("a", "\x1b[31mred\r\nX: y\xff")
	if why, broken, err := ReadAppBroken(root, "a"); !broken || err != nil || why != " [31mred  X: y " {
		t.Fatalf("control bytes: %q %v %v", why, broken, err)
	}
	plant("big", strings.Repeat("x", AppBrokenMax+2))
	if _, _, err := ReadAppBroken(root, "big"); !errors.Is(err, fsutil.ErrTooLarge) {
		t.Fatalf("a marker larger than the bound: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "link"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(root, "link", AppBrokenFile)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadAppBroken(root, "link"); err == nil {
		t.Fatal("a symlinked marker was followed")
	}
	if err := os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadAppBroken(root, "dirlink"); err == nil {
		t.Fatal("a symlinked container directory was followed")
	}
	if err := os.MkdirAll(filepath.Join(root, "fifo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(root, "fifo", AppBrokenFile), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { _, _, err := ReadAppBroken(root, "fifo"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, fsutil.ErrNotRegular) {
			t.Fatalf("a FIFO as the marker: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a FIFO as the marker blocked the reader")
	}
	for _, name := range []string{"", "..", "a/b"} {
		if _, _, err := ReadAppBroken(root, name); err == nil {
			t.Errorf("container name %q was accepted", name)
		}
	}
}

func TestAppBrokenReasonIsBounded(t *testing.T) {
	root, own := stateDirs(t, "b")
	if err := WriteAppBroken(own, strings.Repeat("y", 2*AppBrokenMax)); err != nil {
		t.Fatal(err)
	}
	if why, broken, err := ReadAppBroken(root, "b"); !broken || err != nil || len(why) != AppBrokenMax {
		t.Fatalf("a long reason: %d bytes, %v, %v; want it cut to %d", len(why), broken, err, AppBrokenMax)
	}
}
