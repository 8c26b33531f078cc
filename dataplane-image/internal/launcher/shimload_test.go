package launcher

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The shim-load check with real programs and libraries built here by gcc, loaded by this
// machine's glibc loader. The shim stands in for libff_syscall.so: a library that needs another
// (libdep.so.1, as the real shim needs libnuma and libatomic) found through its run path
// $ORIGIN/lib, the shim volume's lib/ directory.

type built struct {
	dir                       string
	app, static, musl, script string
	shim, dep                 string // the shim and the library it needs, outside the shim dir
	depV1                     string // libdep.so.1 without the symbol version the shim needs
}

func gcc(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func source(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The programs and libraries are built once for the package's tests.
var shared struct {
	once sync.Once
	dir  string
	b    *built
}

func TestMain(m *testing.M) {
	// The fake Nginx masters are shell scripts that trap SIGHUP, as Nginx handles it; a shell
	// cannot trap a signal it started with ignored, as a test run under nohup starts every child.
	// Handled here, SIGHUP reaches the children at its default (a handler does not survive
	// exec), however the tests were started.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func build(t *testing.T) *built {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed (hack/install-deps.sh installs it)")
	}
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "launcher-shimload-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = dir
		shared.b = buildIn(t, dir)
	})
	if shared.b == nil {
		t.Fatal("building the test programs failed in an earlier test")
	}
	return shared.b
}

func buildIn(t *testing.T, dir string) *built {
	b := &built{dir: dir}
	app := source(t, dir, "app.c", "#include <stdio.h>\nint main(int c, char **v) { if (c > 1) { FILE *f = fopen(v[1], \"w\"); if (f) fclose(f); } return 0; }\n")
	b.app, b.static, b.musl = filepath.Join(dir, "app"), filepath.Join(dir, "app-static"), filepath.Join(dir, "app-musl")
	gcc(t, "-o", b.app, app)
	gcc(t, "-static", "-o", b.static, app)
	gcc(t, "-Wl,--dynamic-linker=/lib/ld-musl-x86_64.so.1", "-o", b.musl, app)
	b.script = source(t, dir, "script", "#!/bin/sh\nexit 0\n")
	if err := os.Chmod(b.script, 0o755); err != nil {
		t.Fatal(err)
	}
	dep := source(t, dir, "dep.c", "int dep_fn(void) { return 1; }\n")
	v2 := source(t, dir, "v2.map", "V2 { global: dep_fn; local: *; };\n")
	v1 := source(t, dir, "v1.map", "V1 { global: dep_fn; local: *; };\n")
	for _, d := range []string{"dep", "depv1"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b.dep, b.depV1 = filepath.Join(dir, "dep", "libdep.so.1"), filepath.Join(dir, "depv1", "libdep.so.1")
	gcc(t, "-shared", "-fPIC", "-Wl,-soname,libdep.so.1", "-Wl,--version-script="+v2, "-o", b.dep, dep)
	gcc(t, "-shared", "-fPIC", "-Wl,-soname,libdep.so.1", "-Wl,--version-script="+v1, "-o", b.depV1, dep)
	shim := source(t, dir, "shim.c", `#include <stdio.h>
extern int dep_fn(void);
#include <stdlib.h>
__attribute__((constructor)) static void init(void) { const char *m = getenv("TEST_SHIM_MARKER"); FILE *f = m ? fopen(m, "w") : NULL; if (f) fclose(f); }
int shim_fn(void) { return dep_fn(); }
`)
	b.shim = filepath.Join(dir, "libff_syscall.so")
	gcc(t, "-shared", "-fPIC", "-o", b.shim, shim, "-L"+filepath.Dir(b.dep), "-l:libdep.so.1", "-Wl,-rpath,$ORIGIN/"+podcontract.ShimLibDir, "-Wl,--enable-new-dtags")
	return b
}

func copyTo(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// placeShim fills the shim dir as the dataplane does: the shim, and lib/ with dep (when set).
func placeShim(t *testing.T, l *Launcher, b *built, dep string) {
	t.Helper()
	copyTo(t, b.shim, filepath.Join(l.ShimDir, podcontract.ShimLibrary))
	if dep != "" {
		copyTo(t, dep, filepath.Join(l.ShimDir, podcontract.ShimLibDir, "libdep.so.1"))
	}
	write(t, l.ShimDir, podcontract.GenerationFile, "1\n")
	write(t, l.ShimDir, podcontract.ReadyFile, "1\n")
}

// runApp runs argv through the launcher and says whether the app ran (it creates ran).
func runApp(t *testing.T, l *Launcher, argv ...string) (code int, ran bool) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ran")
	code = l.Run(context.Background(), append(argv, out))
	_, err := os.Stat(out)
	return code, err == nil
}

func TestShimLoadsWithItsLibrariesFromTheShimVolume(t *testing.T) {
	b := build(t)
	l, _, log := newTest(t, 0)
	placeShim(t, l, b, b.dep)
	if code, ran := runApp(t, l, b.app); code != 0 || !ran {
		t.Fatalf("exit %d, ran %v; log:\n%s", code, ran, log)
	}
	want := "the shim loads with " + b.app + " libraries=" + filepath.Join(l.ShimDir, podcontract.ShimLibrary) +
		" with libdep.so.1 from " + filepath.Join(l.ShimDir, podcontract.ShimLibDir)
	if !strings.Contains(readable(t, log.String()), want) {
		t.Fatalf("the log does not say %q:\n%s", want, log)
	}
}

// The listing maps the shim without running it: the real shim would attach to F-Stack.
func TestListingRunsNoConstructorOfTheShim(t *testing.T) {
	b := build(t)
	l, _, _ := newTest(t, 0)
	placeShim(t, l, b, b.dep)
	lib := filepath.Join(l.ShimDir, podcontract.ShimLibrary)
	marker := filepath.Join(t.TempDir(), "constructor-ran")
	env := []string{podcontract.EnvPreload + "=" + lib, "TEST_SHIM_MARKER=" + marker}
	if err := l.proveShimLoads(context.Background(), b.app, env, lib); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the shim's constructor ran while the loader only listed what it would load")
	}
	// The same library does run its constructor when the program runs: the check above can fail.
	cmd := exec.Command(b.app)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the shim's constructor did not run in the program either: this test shows nothing")
	}
}

func TestRefusals(t *testing.T) {
	b := build(t)
	for _, c := range []struct {
		name string
		dep  string // in the shim volume's lib/
		argv string
		want []string
	}{
		{"the shim's library is missing and the dataplane brings no lib/", "", b.app,
			[]string{"this image lacks libdep.so.1, which F-Stack's shim needs", "brings no ", "/" + podcontract.ShimLibDir + " with the shim", "exit 127"}},
		{"the shim's library lacks a symbol version the shim needs", b.depV1, b.app,
			[]string{"the dynamic loader says: ", "version `V2' not found (required by "}},
		{"a static program", b.dep, b.static,
			[]string{b.static + " is statically linked", podcontract.EnvPreload + " cannot load F-Stack's shim"}},
		{"a musl program", b.dep, b.musl,
			[]string{"an Alpine/musl image can never load the glibc shim; use a glibc-based image (Debian, Ubuntu, RHEL...)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _, log := newTest(t, 0)
			placeShim(t, l, b, c.dep)
			code, ran := runApp(t, l, c.argv)
			if code != ExitConfig || ran {
				t.Fatalf("exit %d (want %d), app ran %v; log:\n%s", code, ExitConfig, ran, log)
			}
			for _, w := range c.want {
				if !strings.Contains(readable(t, log.String()), w) {
					t.Errorf("the log lacks %q:\n%s", w, log)
				}
			}
		})
	}
}

// lib/ exists but lacks the library: the dataplane image is at fault, not the app's.
func TestMissingFromTheShimsLibDirBlamesTheDataplaneImage(t *testing.T) {
	b := build(t)
	l, _, log := newTest(t, 0)
	placeShim(t, l, b, "")
	if err := os.Mkdir(filepath.Join(l.ShimDir, podcontract.ShimLibDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _ := runApp(t, l, b.app); code != ExitConfig || !strings.Contains(readable(t, log.String()), "the dataplane image is incomplete") {
		t.Fatalf("exit %d; log:\n%s", code, log)
	}
}

// A library the app itself lacks is named as the app's.
func TestAppsOwnMissingLibraryIsNamedAsTheApps(t *testing.T) {
	b := build(t)
	appdep := source(t, b.dir, "appdep.c", "int appdep_fn(void) { return 0; }\n")
	main := source(t, b.dir, "needs.c", "extern int appdep_fn(void);\nint main(void) { return appdep_fn(); }\n")
	gone := filepath.Join(t.TempDir(), "libappdep.so.1")
	needs := filepath.Join(b.dir, "needs")
	gcc(t, "-shared", "-fPIC", "-Wl,-soname,libappdep.so.1", "-o", gone, appdep)
	gcc(t, "-o", needs, main, "-L"+filepath.Dir(gone), "-l:libappdep.so.1")
	l, _, log := newTest(t, 0)
	placeShim(t, l, b, "")
	if code, _ := runApp(t, l, needs); code != ExitConfig {
		t.Fatalf("exit %d; log:\n%s", code, log)
	}
	for _, w := range []string{"this image lacks libappdep.so.1, which " + needs + " itself needs", "this image lacks libdep.so.1, which F-Stack's shim needs"} {
		if !strings.Contains(readable(t, log.String()), w) {
			t.Errorf("the log lacks %q:\n%s", w, log)
		}
	}
}

// A #! script is judged by its interpreter; a broken shim file is the loader's complaint.
func TestScriptsAndBrokenShims(t *testing.T) {
	b := build(t)
	l, _, log := newTest(t, 0)
	placeShim(t, l, b, b.dep)
	if code := l.Run(context.Background(), []string{b.script}); code != 0 || !strings.Contains(readable(t, log.String()), "the shim loads with /bin/sh") {
		t.Fatalf("script: exit %d; log:\n%s", code, log)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	for script, want := range map[string]string{
		"#!/usr/bin/env bash\nexit 0\n": "the shim loads with " + bash,
		"#!" + b.static + "\n":          b.static + " is statically linked",
	} {
		l, _, log = newTest(t, 0)
		placeShim(t, l, b, b.dep)
		path := filepath.Join(l.ShimDir, "script")
		write(t, l.ShimDir, "script", script)
		if err := os.Chmod(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if l.Run(context.Background(), []string{path}); !strings.Contains(readable(t, log.String()), want) {
			t.Errorf("%q: the log lacks %q:\n%s", script, want, log)
		}
	}
	l, _, log = newTest(t, 0)
	placeShim(t, l, b, b.dep)
	write(t, l.ShimDir, podcontract.ShimLibrary, "not a library")
	if code, ran := runApp(t, l, b.app); code != ExitConfig || ran || !strings.Contains(readable(t, log.String()), "cannot be preloaded") {
		t.Fatalf("broken shim: exit %d, ran %v; log:\n%s", code, ran, log)
	}
}
