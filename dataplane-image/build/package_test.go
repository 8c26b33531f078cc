package build_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// packageSh runs dataplane-image/build/package.sh with the real ldd, strip and patchelf.
func packageSh(t *testing.T, wantOK bool, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("bash", append([]string{abs(t, "package.sh")}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if (err == nil) != wantOK {
		t.Fatalf("package.sh %s: err=%v, want success=%v\n%s", strings.Join(args, " "), err, wantOK, out)
	}
	return string(out)
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: hack/install-deps.sh installs it", tool)
		}
	}
}

func gcc(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
}

// The shim is loaded into app images that lack its libraries: package.sh shim-libs makes each
// shim carry its non-glibc libraries in the shim root's lib/, and check-shim fails an image whose
// shim would look anywhere else. The shims here need libnuma and libatomic, as F-Stack's does,
// and libkfsdep, which stands for a library only the build stage has.
func TestShimCarriesItsLibraries(t *testing.T) {
	needTools(t, "gcc", "ldd", "patchelf", "strip")
	dir := t.TempDir()
	buildDir := filepath.Join(dir, "build-stage")
	root := filepath.Join(dir, "shim")
	for _, d := range []string{buildDir, filepath.Join(root, "multi-sc"), filepath.Join(root, "pipeline")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dep := filepath.Join(dir, "dep.c")
	if err := os.WriteFile(dep, []byte("int kfs_dep(void) { return 7; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gcc(t, "-shared", "-fPIC", "-Wl,-soname,libkfsdep.so.1", "-o", filepath.Join(buildDir, "libkfsdep.so.1"), dep)
	if err := os.Symlink("libkfsdep.so.1", filepath.Join(buildDir, "libkfsdep.so")); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"multi-sc", "pipeline"} {
		gcc(t, "-shared", "-fPIC", "-g", "-o", filepath.Join(root, mode, "libff_syscall.so"), dep,
			"-Wl,--no-as-needed", "-lnuma", "-latomic", "-L"+buildDir, "-lkfsdep")
	}

	// As the image was before: the shim finds libnuma only in /usr/lib, which an app image lacks.
	out := packageSh(t, false, []string{"LD_LIBRARY_PATH=" + buildDir}, "check-shim", root)
	mustContain(t, "check-shim before shim-libs", out, "libnuma.so.1 resolves to", "not to its own lib/")

	before := fileSize(t, filepath.Join(root, "multi-sc", "libff_syscall.so"))
	packageSh(t, true, nil, "strip", root)
	if after := fileSize(t, filepath.Join(root, "multi-sc", "libff_syscall.so")); after >= before {
		t.Errorf("strip: %d bytes, then %d", before, after)
	}
	out = packageSh(t, true, []string{"LD_LIBRARY_PATH=" + buildDir}, "shim-libs", root)
	mustContain(t, "shim-libs", out, "2 shims", "libkfsdep.so.1", "libnuma.so.1", "libatomic.so.1")
	for _, name := range []string{"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2"} {
		if _, err := os.Stat(filepath.Join(root, "lib", name)); err == nil {
			t.Errorf("lib/%s carried: glibc must be the app's own", name)
		}
	}
	// Without the build stage's library path: everything comes from lib/.
	mustContain(t, "check-shim", packageSh(t, true, nil, "check-shim", root), "2 shims load every non-glibc library")

	// A carried library that goes missing fails the image, naming it.
	if err := os.Remove(filepath.Join(root, "lib", "libkfsdep.so.1")); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "check-shim, library removed", packageSh(t, false, nil, "check-shim", root),
		"libkfsdep.so.1 resolves to 'not found'")
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// The stand-in shim must need what F-Stack's needs and stock app images lack (docs/fstack-rules.md §5), or
// the e2e suite could not see an app image fail to load it.
func TestStandinShimNeedsTheRealShimsLibraries(t *testing.T) {
	needTools(t, "gcc", "readelf")
	lib := filepath.Join(t.TempDir(), "libff_syscall.so")
	if out, err := exec.Command(abs(t, "../standin/shim/build.sh"), lib).CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in shim: %v\n%s", err, out)
	}
	out, err := exec.Command("readelf", "-d", lib).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf: %v\n%s", err, out)
	}
	mustContain(t, "the stand-in shim's dynamic section", string(out), "[libnuma.so.1]", "[libatomic.so.1]")
}

// Shim modes whose fstack binaries are identical keep one copy in the image's layer.
func TestLinkDuplicates(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"a/fstack": "same", "b/fstack": "same", "c/fstack": "other"}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustContain(t, "link-duplicates", packageSh(t, true, nil, "link-duplicates", dir), "1 files")
	stat := func(name string) os.FileInfo {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if !os.SameFile(stat("a/fstack"), stat("b/fstack")) {
		t.Errorf("identical files not linked")
	}
	if os.SameFile(stat("a/fstack"), stat("c/fstack")) {
		t.Errorf("different files linked")
	}
	for name, content := range files {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != content {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
}
