package build_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goBinaries are the Go programs the dataplane image carries, built in its supervisor stage.
var goBinaries = []string{"./dataplane-image/cmd/fstack-supervisor", "./dataplane-image/cmd/fstack-launcher"}

// The supervisor stage copies parts of the tree, not all of it: every package the image's Go
// programs import must be under one of its COPY sources, or the image build fails where this
// test would have said which package moved (the launcher and the device-info format did).
func TestSupervisorStageCopiesEveryPackageItsProgramsImport(t *testing.T) {
	var st *stage
	stages := parseDockerfile(t)
	for i := range stages {
		if stages[i].name == "supervisor" {
			st = &stages[i]
		}
	}
	if st == nil {
		t.Fatal("the Dockerfile has no stage named supervisor")
	}
	var sources []string
	for _, c := range st.all("COPY") {
		f := strings.Fields(c)
		sources = append(sources, f[:len(f)-1]...)
	}
	run := strings.Join(st.all("RUN"), "\n")
	for _, bin := range goBinaries {
		if !strings.Contains(run, bin) {
			t.Errorf("the supervisor stage does not build %s:\n%s", bin, run)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test lists the programs' imports with the go tool, which is not on PATH: %v", err)
	}
	const module = "github.com/kube-fstack/kube-fstack/"
	cmd := exec.Command(goBin, append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, goBinaries...)...)
	cmd.Dir = "../.." // the repository root, which the Dockerfile builds from
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	n := 0
	for _, pkg := range strings.Fields(string(out)) {
		dir, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		n++
		if !slices.ContainsFunc(sources, func(src string) bool { return strings.HasPrefix(dir+"/", strings.TrimSuffix(src, "/")+"/") }) {
			t.Errorf("%s is imported by the image's programs but no COPY of the supervisor stage (%v) brings it", dir, sources)
		}
	}
	if n < len(goBinaries) {
		t.Fatalf("go list -deps named %d of the module's packages: not the listing this test reads\n%s", n, out)
	}
}
