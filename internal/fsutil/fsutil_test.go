package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "file")
	for _, content := range []string{"one", "two"} {
		if err := WriteAtomic(path, []byte(content), 0o750); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o750 {
		t.Fatalf("mode %v, want 0750", st.Mode().Perm())
	}
	left, _ := filepath.Glob(filepath.Join(dir, "sub", ".*"))
	if len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
}
