package build_test

import (
	"os"
	"path/filepath"
	"testing"
)

// upstream makes a git repository of the stand-in tree (standing in for F-Stack's) with two
// commits and returns it with their ids: the first is "the pin", the second a later commit.
func upstream(t *testing.T) (repo, pinned, later string) {
	t.Helper()
	repo = filepath.Join(t.TempDir(), "f-stack.git")
	if err := os.CopyFS(repo, os.DirFS("testdata/fstack")); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "v1.25 stand-in")
	pinned = git(t, repo, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(repo, "lib/ff_config.c"), []byte("/* changed */\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "commit", "-qam", "later")
	later = git(t, repo, "rev-parse", "HEAD")
	return repo, pinned, later
}

func TestFetchChecksOutThePinnedCommit(t *testing.T) {
	repo, pinned, _ := upstream(t)
	r := newRecipe(t)
	tree := filepath.Join(t.TempDir(), "src")
	r = r.with("FF_PATH="+tree, "FSTACK_REPO=file://"+repo, "FSTACK_COMMIT="+pinned)
	mustContain(t, "fetch output", r.mustRun("fetch"), "F-Stack is commit "+pinned)
	if head := git(t, tree, "rev-parse", "HEAD"); head != pinned {
		t.Errorf("checked out %s, want %s", head, pinned)
	}
	// The branch moved on; the pin did not.
	if got := r.read(filepath.Join(tree, "lib/ff_config.c")); got == "/* changed */\n" {
		t.Errorf("fetch took the branch's newest commit")
	}
}

func TestPinCheckRejectsAnotherCommitATagAndLocalChanges(t *testing.T) {
	repo, pinned, later := upstream(t)
	r := newRecipe(t)
	tree := filepath.Join(t.TempDir(), "src")
	r = r.with("FF_PATH="+tree, "FSTACK_REPO=file://"+repo, "FSTACK_COMMIT="+pinned)
	r.mustRun("fetch")

	mustContain(t, "verify-pin, another commit", r.with("FSTACK_COMMIT="+later).mustFail("verify-pin"),
		"is commit "+pinned+", expected "+later)

	other := r.with("FF_PATH="+filepath.Join(t.TempDir(), "tag"), "FSTACK_COMMIT=v1.25")
	mustContain(t, "fetch by tag", other.mustFail("fetch"), "must be a full 40-hex commit id")

	absent := r.with("FF_PATH="+filepath.Join(t.TempDir(), "absent"), "FSTACK_COMMIT=0123456789abcdef0123456789abcdef01234567")
	absent.mustFail("fetch")

	if err := os.WriteFile(filepath.Join(tree, "lib/ff_config.c"), []byte("tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "verify-pin, modified tree", r.mustFail("verify-pin"), "has local changes")
}

// The whole recipe, as the Dockerfile runs it, from a fetch of the stand-in repository to the
// directories the image's last stage copies.
func TestEveryStepInOrderFromFetchToInstall(t *testing.T) {
	repo, pinned, _ := upstream(t)
	r := newRecipe(t)
	r = r.with("FF_PATH="+filepath.Join(t.TempDir(), "src"), "FSTACK_REPO=file://"+repo, "FSTACK_COMMIT="+pinned)
	r.mustRun("all")
	for _, p := range []string{"tools/traffic", "shim/kernel-event+multi-sc/libff_syscall.so", "shim/pipeline/fstack"} {
		if _, err := os.Stat(filepath.Join(r.out, p)); err != nil {
			t.Errorf("after all steps: %v", err)
		}
	}
}
