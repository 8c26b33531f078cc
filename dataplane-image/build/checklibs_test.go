package build_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// check-libs runs the real ldd: a binary whose library is gone fails it, naming the library.
func TestCheckLibsFailsOnAMissingLibrary(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatal("gcc is needed to build the test's binaries: hack/install-deps.sh installs it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "x.c")
	if err := os.WriteFile(src, []byte("int kfs_probe(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "main.c")
	if err := os.WriteFile(main, []byte("int kfs_probe(void);\nint main(void) { return kfs_probe(); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libkfsprobe.so")
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-o", lib, src},
		{"-o", filepath.Join(bin, "probe"), main, "-L" + dir, "-lkfsprobe", "-Wl,-rpath," + dir},
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	// Not dynamic (ldd exits 1 on it), like the image's static Go binaries: not a failure.
	if err := os.WriteFile(filepath.Join(bin, "launcher"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := newRecipe(t)
	mustContain(t, "check-libs", r.mustRun("check-libs", dir), "every library of 3 files")
	if err := os.Remove(lib); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "check-libs, library removed", r.mustFail("check-libs", bin), "libkfsprobe.so => not found")
	mustContain(t, "check-libs, empty", r.mustFail("check-libs", t.TempDir()), "no binaries")
}
