package nodetest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Tree records each path under roots with its type, mode and content (a symlink's target),
// without following symlinks: what a test holds unchanged while hostile input is processed.
func Tree(t testing.TB, roots ...string) map[string]string {
	t.Helper()
	s := map[string]string{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			st, err := os.Lstat(p)
			if err != nil {
				return err
			}
			v := st.Mode().String()
			switch {
			case st.Mode().IsRegular():
				b, _ := os.ReadFile(p)
				v += " " + string(b)
			case st.Mode()&fs.ModeSymlink != 0:
				target, _ := os.Readlink(p)
				v += " -> " + target
			}
			s[p] = v
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// AssertSameTree fails for every path of before that changed or went, and every path that
// appeared.
func AssertSameTree(t testing.TB, before, after map[string]string) {
	t.Helper()
	for p, v := range before {
		if got, ok := after[p]; !ok {
			t.Errorf("%s was removed", p)
		} else if got != v {
			t.Errorf("%s changed: %.80q -> %.80q", p, v, got)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared", p)
		}
	}
}
