package build_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Dockerfile cannot be built here (F-Stack's source is out of reach); these tests hold it
// to the script the other tests run: same steps, same pin, and the dataplane stage copies what the
// install step produces and checks its libraries.

type instruction struct{ op, args string }

type stage struct {
	name  string
	instr []instruction
}

func parseDockerfile(t *testing.T) []stage {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			line += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		line += l
		op, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		line = ""
		if op == "FROM" {
			name := ""
			if _, n, ok := strings.Cut(args, " AS "); ok {
				name = n
			}
			stages = append(stages, stage{name: name})
		}
		if len(stages) > 0 {
			stages[len(stages)-1].instr = append(stages[len(stages)-1].instr, instruction{op, strings.Join(strings.Fields(args), " ")})
		}
	}
	if len(stages) < 3 || stages[0].name != "fstack" {
		t.Fatalf("Dockerfile: want an fstack stage first and a last stage, got %d stages", len(stages))
	}
	return stages
}

func (s stage) all(op string) []string {
	var out []string
	for _, i := range s.instr {
		if i.op == op {
			out = append(out, i.args)
		}
	}
	return out
}

func TestDockerfileRunsEveryStepOfTheScriptInOrder(t *testing.T) {
	build := parseDockerfile(t)[0]
	if !slices.Contains(build.all("COPY"), "dataplane-image/build/build-fstack.sh /src/build-fstack.sh") {
		t.Fatalf("the fstack stage does not copy the script to /src/build-fstack.sh: %q", build.all("COPY"))
	}
	var ran []string
	step := regexp.MustCompile(`^/src/build-fstack\.sh (\S+)$`)
	for _, run := range build.all("RUN") {
		if m := step.FindStringSubmatch(run); m != nil {
			ran = append(ran, m[1])
		}
	}
	want := strings.Fields(newRecipe(t).mustRun("steps"))
	if !slices.Equal(ran, want) {
		t.Errorf("the fstack stage runs steps %v, the script's are %v", ran, want)
	}
	env := strings.Join(build.all("ENV"), " ")
	mustContain(t, "fstack stage ENV", env, "OUT=/out", "PATCH_DIR=/src/patches", "FSTACK_COMMIT=${FSTACK_COMMIT}")
	if !slices.Contains(build.all("COPY"), "dataplane-image/patches/ /src/patches/") {
		t.Errorf("the patches are not copied to PATCH_DIR")
	}
}

func TestDockerfileAndScriptPinTheSameCommit(t *testing.T) {
	b, err := os.ReadFile("build-fstack.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`FSTACK_COMMIT=\$\{FSTACK_COMMIT:-([0-9a-f]{40})\}`).FindSubmatch(b)
	if m == nil || string(m[1]) != "761639943bdda33103aa98241ca6a3079f1c1b7e" {
		t.Fatalf("build-fstack.sh's default pin is %q, want v1.25's commit", m)
	}
	for _, s := range parseDockerfile(t) {
		for _, arg := range s.all("ARG") {
			if name, val, _ := strings.Cut(arg, "="); name == "FSTACK_COMMIT" && val != string(m[1]) {
				t.Errorf("stage %q: ARG FSTACK_COMMIT=%s, the script pins %s", s.name, val, m[1])
			}
		}
	}
}

// stageNamed is the stage FROM ... AS name.
func stageNamed(t *testing.T, stages []stage, name string) stage {
	t.Helper()
	for _, s := range stages {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("Dockerfile: no stage named %q", name)
	return stage{}
}

func TestDataplaneStageCopiesWhatInstallProducesAndChecksItsLibraries(t *testing.T) {
	last := stageNamed(t, parseDockerfile(t), "dataplane")
	r := newRecipe(t)
	r.mustRun("patch", "lib", "tools", "adapter", "install")

	outs, err := os.ReadDir(r.out)
	if err != nil {
		t.Fatal(err)
	}
	produced := map[string]bool{}
	for _, e := range outs {
		produced[e.Name()] = true
	}
	var dests []string
	for _, c := range last.all("COPY") {
		f := strings.Fields(c)
		// The package stage is the fstack stage with its /out stripped and the shims' libraries added.
		if f[0] != "--from=fstack" && f[0] != "--from=package" {
			continue
		}
		src, dst := f[1], f[2]
		dests = append(dests, dst)
		rel, ok := strings.CutPrefix(strings.TrimSuffix(src, "/"), "/out/")
		if !ok {
			t.Errorf("COPY %s %s: not under the script's OUT (/out)", f[0], src)
			continue
		}
		// Something built in the stage outside the script (the probe agent) may also land in /out.
		if top, _, _ := strings.Cut(rel, "/"); produced[top] {
			if entries, err := os.ReadDir(filepath.Join(r.out, rel)); err != nil || len(entries) == 0 {
				t.Errorf("COPY %s %s: the install step leaves nothing there (%v)", f[0], src, err)
			}
			delete(produced, top)
		}
	}
	for name := range produced {
		t.Errorf("the install step produces /out/%s, which the dataplane stage does not copy", name)
	}

	var checked []string
	for _, run := range last.all("RUN") {
		if _, args, ok := strings.Cut(run, "build-fstack.sh check-libs "); ok {
			checked = strings.Fields(args)
		}
	}
	for _, d := range dests {
		// License texts (package.sh notices) hold no binary for check-libs to look at.
		if strings.HasPrefix(d, "/usr/share/doc/") {
			continue
		}
		if !slices.ContainsFunc(checked, func(c string) bool { return strings.HasPrefix(d, strings.TrimSuffix(c, "/")+"/") }) {
			t.Errorf("%s is copied into the image but check-libs (%v) does not cover it", d, checked)
		}
	}
	// A shim that looked for a library outside its own lib/ would load in no stock app image.
	if !strings.Contains(strings.Join(last.all("RUN"), "\n"), "package.sh check-shim /opt/kube-fstack/shim") {
		t.Errorf("the dataplane stage does not check that every shim carries its libraries (package.sh check-shim)")
	}
	// The image ships the licenses of what it carries (NOTICE): F-Stack's tree's, the Go modules',
	// and Debian's, whose list fails the build on a package without a copyright file.
	if !slices.Contains(dests, "/usr/share/doc/kube-fstack/f-stack/") {
		t.Errorf("the dataplane stage does not copy package.sh notices' output to /usr/share/doc/kube-fstack/f-stack/ (COPY destinations %v)", dests)
	}
	if !strings.Contains(strings.Join(last.all("COPY"), "\n"), "--from=supervisor /out/doc/ /usr/share/doc/kube-fstack/") {
		t.Errorf("the dataplane stage does not copy the Go programs' LICENSE, NOTICE and THIRD_PARTY_NOTICES")
	}
	if !strings.Contains(strings.Join(last.all("RUN"), "\n"), "package.sh debian-notices /usr/share/doc/kube-fstack/debian-packages.txt") {
		t.Errorf("the dataplane stage does not list its Debian packages' copyright files (package.sh debian-notices)")
	}
}

// The image's io.kubefstack.patches label names every patch the build applies, in order (each
// file of patches/ without its number and extension): a user reading the label of an image learns
// what the build changed in F-Stack, and a new patch cannot ship unnamed.
func TestPatchesLabelNamesEveryPatch(t *testing.T) {
	files, err := filepath.Glob("../patches/*.patch")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	var want []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".patch")
		if _, rest, ok := strings.Cut(name, "-"); ok {
			name = rest
		}
		want = append(want, name)
	}
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`io\.kubefstack\.patches="([^"]*)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Dockerfile has no io.kubefstack.patches label")
	}
	if got := strings.Split(string(m[1]), ","); !slices.Equal(got, want) {
		t.Errorf("io.kubefstack.patches = %q, want %q (dataplane-image/patches/)", got, want)
	}
}
