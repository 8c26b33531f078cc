package hack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo stands for the Go toolchain under hack/fuzz.sh: `go test -list` names one target,
// FuzzDecodeSpec, and a fuzz run behaves as the case says:
//   - deadline: what CI saw under CPU starvation, the coordinator ending at the -fuzztime boundary
//     with "context deadline exceeded", exit 1, no input written;
//   - crasher: a real failure, go test writing the input under testdata/fuzz/<target>/;
//   - broken: exit 1 with neither (a build failure).
const fakeGo = `#!/bin/bash
if [ "$2" = -list ]; then echo FuzzDecodeSpec; echo "ok   $3 0.01s"; exit 0; fi
pkg="$2"
case "$FAKE_FUZZ" in
  deadline)
    echo "fuzz: elapsed: 9s, execs: 1234 (137/sec), new interesting: 0 (total: 12)"
    echo "--- FAIL: FuzzDecodeSpec (10.02s)"
    echo "    context deadline exceeded"
    echo "FAIL"; exit 1 ;;
  crasher)
    mkdir -p "$pkg/testdata/fuzz/FuzzDecodeSpec"
    printf 'go test fuzz v1\nstring("processes: -1")\n' >"$pkg/testdata/fuzz/FuzzDecodeSpec/5c1e0ab2d3"
    echo "fuzz: elapsed: 3s, execs: 99 (33/sec)"
    echo "--- FAIL: FuzzDecodeSpec (3.01s)"
    echo "    spec_test.go:40: panic: index out of range"
    echo "    Failing input written to testdata/fuzz/FuzzDecodeSpec/5c1e0ab2d3"
    echo "    context deadline exceeded"
    echo "FAIL"; exit 1 ;;
  broken)
    echo "./spec_test.go:3:1: syntax error"; echo "FAIL"; exit 1 ;;
esac
echo "fuzz: elapsed: 10s, execs: 5000 (500/sec)"; echo PASS
`

// runFuzz runs a copy of hack/fuzz.sh in a tree with one package holding a fuzz target (the
// script finds targets in its own tree) under the fake go.
func runFuzz(t *testing.T, mode string) (string, error) {
	t.Helper()
	tree := t.TempDir()
	script, err := os.ReadFile(filepath.Join(repoRoot(t), "hack", "fuzz.sh"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tree, "hack", "fuzz.sh"), string(script), 0o755)
	writeFile(t, filepath.Join(tree, "spec", "spec_test.go"),
		"package spec\n\nimport \"testing\"\n\nfunc FuzzDecodeSpec(f *testing.F) {}\n", 0o644)
	// A committed seed is not a new crasher.
	writeFile(t, filepath.Join(tree, "spec", "testdata", "fuzz", "FuzzDecodeSpec", "seed0"), "go test fuzz v1\nstring(\"\")\n", 0o644)
	writeFile(t, filepath.Join(tree, "bin", "go"), fakeGo, 0o755)
	cmd := exec.Command(filepath.Join(tree, "hack", "fuzz.sh"))
	cmd.Env = append(os.Environ(), "GO="+filepath.Join(tree, "bin", "go"), "FUZZTIME=10s", "FAKE_FUZZ="+mode)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// On main, fuzz.sh failed this run (and `make test` stopped there, skipping every later tier).
func TestFuzzCoordinatorDeadlineIsAWarningNotAFailure(t *testing.T) {
	out, err := runFuzz(t, "deadline")
	if err != nil {
		t.Fatalf("fuzz.sh failed on the coordinator's own deadline: %v\n%s", err, out)
	}
	for _, want := range []string{"WARN", "context deadline exceeded", "no failing input written"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestFuzzCrasherFailsAndIsPrinted(t *testing.T) {
	out, err := runFuzz(t, "crasher")
	if err == nil {
		t.Fatalf("fuzz.sh passed with a crasher written:\n%s", out)
	}
	for _, want := range []string{"FAIL ./spec", "crasher ./spec/testdata/fuzz/FuzzDecodeSpec/5c1e0ab2d3", `string("processes: -1")`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "seed0") {
		t.Errorf("the committed seed is reported as a crasher:\n%s", out)
	}
}

func TestFuzzOtherFailureStillFails(t *testing.T) {
	out, err := runFuzz(t, "broken")
	if err == nil || !strings.Contains(out, "syntax error") {
		t.Fatalf("fuzz.sh on a failure with no deadline and no input: err=%v, want a failure with its log\n%s", err, out)
	}
}

func TestFuzzPassingRunPasses(t *testing.T) {
	out, err := runFuzz(t, "ok")
	if err != nil || !strings.Contains(out, "ok   ./spec") {
		t.Fatalf("fuzz.sh on a passing run: err=%v\n%s", err, out)
	}
}
