package podcontract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// stringLiteral is one Go string literal of the module, where it stands.
type stringLiteral struct {
	file  string // relative to the module root
	line  int
	value string
}

// eachStringLiteral calls visit with every string literal of the module's Go files that keep
// passes (a path relative to the module root), skipping hidden folders, testdata, bin and vendor,
// and returns how many files it read. The contract tests use it to find a second spelling of a
// name the contract owns.
func eachStringLiteral(t *testing.T, keep func(rel string, dir bool) bool, visit func(stringLiteral)) int {
	t.Helper()
	root := moduleRoot(t)
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			n := d.Name()
			if path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin" || n == "vendor" || !keep(rel, true)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || !keep(rel, false) {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Errorf("%s: %v", fset.Position(lit.Pos()), err)
					return true
				}
				visit(stringLiteral{file: rel, line: fset.Position(lit.Pos()).Line, value: s})
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
