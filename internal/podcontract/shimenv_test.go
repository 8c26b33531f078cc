package podcontract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The shim's variable names are spelled once, here: every other Go file of the module, tests
// included, uses the constants. A literal elsewhere is a second copy of the contract that a
// rename would miss (the dataplane, the launcher and the tests would then disagree with the
// shim without a compile error). Prose in comments is free; string literals are not, messages
// included. The stand-in shim's C source keeps its own literals, held equal to these by
// dataplane-image/standin/shim/test.
func TestNoGoFileOutsidePodcontractSpellsTheShimNames(t *testing.T) {
	root := moduleRoot(t)
	var names []string
	for _, n := range ShimEnvNames() {
		names = append(names, regexp.QuoteMeta(n))
	}
	spelled := regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b`)
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			if path == self {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Errorf("%s: %v", fset.Position(lit.Pos()), err)
				return true
			}
			if m := spelled.FindString(s); m != "" {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d spells %s in a string literal: use podcontract's constant (ShimEnvNames)", rel, fset.Position(lit.Pos()).Line, m)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 300 {
		t.Fatalf("scanned %d Go files under %s, expected the whole module", files, root)
	}
}

// moduleRoot is the directory of the go.mod above the test's working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
