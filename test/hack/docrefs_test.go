package hack_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// docRefs runs hack/check-doc-refs.sh in a repository of its own holding files (path: content),
// and returns its output and whether it passed.
func docRefs(t *testing.T, files map[string]string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join(repoRoot(t), "hack", "check-doc-refs.sh"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "hack", "check-doc-refs.sh"), string(script), 0o755)
	for p, c := range files {
		writeFile(t, filepath.Join(dir, p), c, 0o644)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out, err := exec.Command(filepath.Join(dir, "hack", "check-doc-refs.sh")).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return string(out), err == nil
}

const rules = "# Rules\n\n## §8 Building\n\n| R3 | a rule |\n"

// A citation of a document outside the tree fails wherever it is, testdata included (a stand-in
// Makefile under testdata cited the team's FSTACK.md, which no user of the repository has).
func TestDocRefsRefusesDocumentsOutsideTheTree(t *testing.T) {
	for _, where := range []string{"hack/build.sh", "dataplane-image/build/testdata/fstack/tools/Makefile"} {
		out, ok := docRefs(t, map[string]string{
			"docs/fstack-rules.md": rules,
			where:                  "# keeps only the last status (FSTACK.md 13.2).\n",
		})
		if ok || !strings.Contains(out, where+":1:") || !strings.Contains(out, "cite docs/fstack-rules.md") {
			t.Errorf("%s citing FSTACK.md: passed %v, want a failure naming it:\n%s", where, ok, out)
		}
	}
}

func TestDocRefsResolvesSectionsAndRules(t *testing.T) {
	out, ok := docRefs(t, map[string]string{
		"docs/fstack-rules.md": rules,
		"a/testdata/Makefile":  "# docs/fstack-rules.md §8 R3\n",
		"b.go":                 "// docs/fstack-rules.md §8\n",
	})
	if !ok {
		t.Fatalf("citations that resolve were refused:\n%s", out)
	}
	for cite, want := range map[string]string{
		"docs/fstack-rules.md §9":    "no such section",
		"docs/fstack-rules.md §8 R4": "not a rule there",
		"docs/missing.md":            "does not exist",
	} {
		out, ok := docRefs(t, map[string]string{"docs/fstack-rules.md": rules, "a/testdata/Makefile": "# " + cite + "\n"})
		if ok || !strings.Contains(out, want) {
			t.Errorf("a testdata file citing %s: passed %v, want %q:\n%s", cite, ok, want, out)
		}
	}
}
