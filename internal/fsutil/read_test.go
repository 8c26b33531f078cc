package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// returns runs f in a goroutine and fails the test if it never returns: the failure mode of a
// blocking open is a hang, so the bound is generous and says nothing about speed.
func returns(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never returned: a FIFO blocked the reader", what)
	}
}

// A FIFO, a symlink, a directory or an oversize file where a regular file belongs is refused at
// once, with the file's path in the error; a small regular file is read whole.
func TestReadFileRefusesWhatIsNotASmallRegularFile(t *testing.T) {
	d, root := openRoot(t)
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim(t), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "sublink")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sub", "ok"), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "big"), []byte(strings.Repeat("x", 65)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rel  string
		want string
		is   error
	}{
		{"fifo", "a FIFO", ErrNotRegular},
		{"link", "too many levels of symbolic links", nil},
		{"sublink/ok", "", nil},
		{"sub", "a directory", ErrNotRegular},
		{"big", "at most 64 bytes", ErrTooLarge},
		{"../x", "", nil},
	} {
		var err error
		returns(t, "ReadFile("+c.rel+")", func() { _, err = d.ReadFile(c.rel, 64) })
		if err == nil {
			t.Errorf("%s was read", c.rel)
			continue
		}
		if !strings.Contains(err.Error(), root+"/"+c.rel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want the path and %q", c.rel, err, c.want)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v is not %v", c.rel, err, c.is)
		}
	}
	var data []byte
	var err error
	returns(t, "ReadFileBeneath", func() { data, err = ReadFileBeneath(root, "sub/ok", 64) })
	if err != nil || string(data) != "7\n" {
		t.Fatalf("sub/ok: %q %v", data, err)
	}
	if _, err := ReadFileBeneath(root, "missing", 64); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v, want ErrNotExist", err)
	}
}

// OpenRegular hands back a regular file only, and a FIFO does not block it.
func TestOpenRegularRefusesAFIFO(t *testing.T) {
	_, root := openRoot(t)
	if err := unix.Mkfifo(filepath.Join(root, "config"), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	returns(t, "OpenRegularBeneath", func() {
		var f *os.File
		if f, err = OpenRegularBeneath(root, "config"); err == nil {
			f.Close()
		}
	})
	if !errors.Is(err, ErrNotRegular) {
		t.Fatalf("a FIFO: %v", err)
	}
}
