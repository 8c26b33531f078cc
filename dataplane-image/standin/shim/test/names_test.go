package shimtest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The stand-in shim is C and spells the shim's variables itself, as F-Stack's libff_syscall.so
// does: every F-Stack variable it reads is one of podcontract's names, and it reads the two
// its context slots depend on (the instance count and the process id), so a rename in
// podcontract cannot leave the stand-in reading a variable nobody sets.
func TestTheStandinReadsPodcontractsNames(t *testing.T) {
	read := regexp.MustCompile(`(?:getenv|env_long)\(\s*"([A-Z0-9_]+)"`)
	sources, err := filepath.Glob("../*.c")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no C sources of the stand-in shim beside its test: %v", err)
	}
	var ff []string
	for _, src := range sources {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range read.FindAllStringSubmatch(string(data), -1) {
			if name := m[1]; strings.HasPrefix(name, "FF_") || name == podcontract.EnvPreload {
				if !slices.Contains(podcontract.ShimEnvNames(), name) {
					t.Errorf("%s reads %s, which is none of podcontract's shim variables %v", src, name, podcontract.ShimEnvNames())
				}
				ff = append(ff, name)
			}
		}
	}
	for _, want := range []string{podcontract.EnvShimInstances, podcontract.EnvShimProcID} {
		if !slices.Contains(ff, want) {
			t.Errorf("the stand-in shim never reads %s (it reads %v)", want, ff)
		}
	}
}
