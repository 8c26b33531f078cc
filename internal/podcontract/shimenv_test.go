package podcontract

import (
	"os"
	"path/filepath"
	"regexp"
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
	selfRel, err := filepath.Rel(root, self)
	if err != nil {
		t.Fatal(err)
	}
	files := eachStringLiteral(t, func(rel string, dir bool) bool { return !dir || rel != selfRel }, func(l stringLiteral) {
		if m := spelled.FindString(l.value); m != "" {
			t.Errorf("%s:%d spells %s in a string literal: use podcontract's constant (ShimEnvNames)", l.file, l.line, m)
		}
	})
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
