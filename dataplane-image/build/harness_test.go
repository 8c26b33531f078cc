// Package build_test runs build-fstack.sh, the dataplane image's F-Stack build, against a
// stand-in of F-Stack v1.25's source tree (testdata/fstack, with a fake meson and ninja in
// testdata/bin). F-Stack itself cannot be fetched or built here; each fake says which upstream
// file it stands for and reproduces the behaviour measured on the real tree (docs/fstack-rules.md §8).
// make, patch, git, awk and ldd are the real ones.
package build_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// recipe is one run of the build script over a private copy of the stand-in tree.
type recipe struct {
	t      *testing.T
	root   string
	tree   string // FF_PATH
	out    string // OUT: what the image's last stage copies from
	script string
	env    []string
}

func newRecipe(t *testing.T) *recipe {
	t.Helper()
	root := t.TempDir()
	r := &recipe{t: t, root: root, tree: filepath.Join(root, "f-stack"), out: filepath.Join(root, "out"),
		script: abs(t, "build-fstack.sh")}
	if err := os.CopyFS(r.tree, os.DirFS("testdata/fstack")); err != nil {
		t.Fatalf("copying the stand-in tree: %v", err)
	}
	// A build container has no kernel headers: the fake meson looks for them here.
	noHeaders := filepath.Join(root, "lib-modules")
	if err := os.Mkdir(noHeaders, 0o755); err != nil {
		t.Fatal(err)
	}
	r.env = append(os.Environ(),
		"PATH="+abs(t, "testdata/bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FF_PATH="+r.tree, "PATCH_DIR="+abs(t, "../patches"), "OUT="+r.out,
		"LIB_PREFIX="+filepath.Join(root, "prefix"), "JOBS=2", "FAKE_MESON_KERNEL_DIR="+noHeaders)
	return r
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// with returns the recipe with extra environment (later entries win).
func (r *recipe) with(kv ...string) *recipe {
	c := *r
	c.env = append(append([]string(nil), r.env...), kv...)
	return &c
}

func (r *recipe) run(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{r.script}, args...)...)
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *recipe) mustRun(args ...string) string {
	r.t.Helper()
	out, err := r.run(args...)
	if err != nil {
		r.t.Fatalf("build-fstack.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (r *recipe) mustFail(args ...string) string {
	r.t.Helper()
	out, err := r.run(args...)
	if err == nil {
		r.t.Fatalf("build-fstack.sh %s succeeded, want a failure\n%s", strings.Join(args, " "), out)
	}
	return out
}

// sh runs a command in the stand-in tree the way the old Dockerfile did, with the fakes on PATH.
func (r *recipe) sh(dir, command string) (string, error) {
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = filepath.Join(r.tree, dir)
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *recipe) write(rel, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.tree, rel), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *recipe) read(path string) string {
	r.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

func mustContain(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

// git runs git in dir with a fixed identity.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=kfs", "-c", "user.email=kfs@test.invalid",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
