// Command codestats prints the size figures an architecture review reads (make stats): the
// product's Go lines and the test lines, and the product's longest functions. Product code is
// every non-generated .go file outside tests and test support (*_test.go, internal/test/, any
// test/ folder, e2e/, hack/): what ships in a binary. Complexity (gocyclo, gocognit) comes from
// golangci-lint, which holds the limits (.golangci.yml).
//
//	codestats [-top N] [-over LINES]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type fn struct {
	name  string
	pos   string
	lines int
}

func main() {
	top := flag.Int("top", 5, "how many of the longest functions to list")
	over := flag.Int("over", 60, "count the functions longer than this many lines")
	flag.Parse()
	var prodLines, testLines int
	var fns []fn
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "bin" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasPrefix(filepath.Base(path), "zz_generated") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := strings.Count(string(src), "\n")
		if !product(path) {
			if strings.HasSuffix(path, "_test.go") {
				testLines += n
			}
			return nil
		}
		prodLines += n
		found, err := functions(path, src)
		fns = append(fns, found...)
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "codestats:", err)
		os.Exit(1)
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
	count := 0
	for _, f := range fns {
		if f.lines > *over {
			count++
		}
	}
	fmt.Printf("product Go lines: %d\ntest Go lines: %d\nproduct functions: %d, over %d lines: %d\nlongest:\n", prodLines, testLines, len(fns), *over, count)
	for _, f := range fns[:min(*top, len(fns))] {
		fmt.Printf("  %4d  %s  %s\n", f.lines, f.name, f.pos)
	}
}

// product says whether path ships in a binary.
func product(path string) bool {
	if strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, "hack/") || strings.HasPrefix(path, "e2e/") ||
		strings.HasPrefix(path, "internal/test/") {
		return false
	}
	return !strings.Contains("/"+path, "/test/")
}

// functions are the declared functions and methods of a file, with their length in lines
// (from the func keyword to the closing brace).
func functions(path string, src []byte) ([]fn, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []fn
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			name = "(" + types(fd.Recv.List[0].Type) + ")." + name
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		out = append(out, fn{name: name, pos: fmt.Sprintf("%s:%d", path, start.Line), lines: end.Line - start.Line + 1})
	}
	return out, nil
}

// types is a receiver's type as written (*command, list[T]).
func types(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + types(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return types(t.X)
	case *ast.IndexListExpr:
		return types(t.X)
	}
	return "?"
}
