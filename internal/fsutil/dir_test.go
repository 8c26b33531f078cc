package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// victim is a file outside the root that a hostile tree points at.
func victim(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func assertUntouched(t *testing.T, p string) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatalf("victim: %v", err)
	}
	got, _ := os.ReadFile(p)
	if string(got) != "secret" || st.Mode().Perm() != 0o600 {
		t.Fatalf("victim changed: %q %v", got, st.Mode().Perm())
	}
}

func openRoot(t *testing.T) (*Dir, string) {
	t.Helper()
	root := t.TempDir()
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, root
}

// A symlink at the final name is replaced, never written through, and the mode is exact.
func TestWriteAtomicReplacesSymlink(t *testing.T) {
	d, root := openRoot(t)
	v := victim(t)
	if err := os.Symlink(v, filepath.Join(root, "f.json")); err != nil {
		t.Fatal(err)
	}
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	if err := d.WriteAtomic("f.json", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	assertUntouched(t, v)
	st, err := os.Lstat(filepath.Join(root, "f.json"))
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o644 {
		t.Fatalf("f.json: %v %v", st, err)
	}
	names, _ := d.Names()
	if len(names) != 1 {
		t.Fatalf("left behind: %v", names)
	}
}

// Planted temp names of every shape the old writer used are never written through, with
// O_TMPFILE or without.
func TestWriteAtomicIgnoresPlantedTemps(t *testing.T) {
	for _, off := range []bool{false, true} {
		noTmpfile = off
		writeBesidePlantedTemps(t)
	}
	noTmpfile = false
}

func writeBesidePlantedTemps(t *testing.T) {
	d, root := openRoot(t)
	v := victim(t)
	for _, n := range []string{".devinfo-f.json.tmp", TempPrefix("f.json"), TempPrefix("f.json") + "0"} {
		if err := os.Symlink(v, filepath.Join(root, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.WriteAtomic("f.json", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	assertUntouched(t, v)
}

func TestNamesAreResolvedBeneath(t *testing.T) {
	d, root := openRoot(t)
	v := victim(t)
	outside := filepath.Dir(v)
	must(t, os.Symlink(outside, filepath.Join(root, "link")))
	must(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	for _, rel := range []string{"link/secret", "../" + filepath.Base(outside) + "/secret", "sub/../../x", "link"} {
		if _, err := d.ReadFile(rel, 100); err == nil {
			t.Errorf("ReadFile(%q) succeeded", rel)
		}
		if _, err := d.OpenDir(rel); err == nil {
			t.Errorf("OpenDir(%q) succeeded", rel)
		}
		if fd, err := d.openWalk(rel, unix.O_RDONLY, 0); err == nil {
			unix.Close(fd)
			t.Errorf("openWalk(%q) succeeded", rel)
		}
	}
	if _, _, err := d.MkdirOpen("link", 0o755); err == nil {
		t.Error("MkdirOpen through a symlink succeeded")
	}
	for _, n := range []string{"..", ".", "a/b", ""} {
		if err := d.Remove(n); !errors.Is(err, ErrNotPlain) {
			t.Errorf("Remove(%q): %v", n, err)
		}
	}
	must(t, d.Remove("link")) // the link itself, not its target
	assertUntouched(t, v)
}

func TestReadFileRefusesSpecialAndLargeFiles(t *testing.T) {
	d, root := openRoot(t)
	must(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "big"), make([]byte, 101), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "ok"), []byte("ok"), 0o644))
	for _, n := range []string{"fifo", "big"} {
		if _, err := d.ReadFile(n, 100); err == nil {
			t.Errorf("ReadFile(%q) succeeded", n)
		}
	}
	if got, err := d.ReadFile("ok", 100); err != nil || string(got) != "ok" {
		t.Fatalf("ReadFile(ok) = %q, %v", got, err)
	}
	fd, err := d.openWalk("ok", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("openWalk(ok): %v", err)
	}
	unix.Close(fd)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
