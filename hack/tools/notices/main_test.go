package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A module's license files are found under the module cache's escaped name (upper case as !x),
// every license-like file at its root is shipped and nothing else is.
func TestRenderShipsEveryLicenseFileOfEachModule(t *testing.T) {
	cache, goroot := t.TempDir(), t.TempDir()
	write(t, filepath.Join(goroot, "LICENSE"), "Go's license\n")
	write(t, filepath.Join(cache, "github.com/!burnt!sushi/toml@v1.0.0/COPYING"), "toml's license")
	write(t, filepath.Join(cache, "golang.org/x/net@v0.1.0/LICENSE"), "x/net license\n")
	write(t, filepath.Join(cache, "golang.org/x/net@v0.1.0/PATENTS"), "x/net patents\n")
	write(t, filepath.Join(cache, "golang.org/x/net@v0.1.0/README.md"), "not a license\n")
	mods := []*module{
		{path: "std", version: "go1.26.0", by: []string{"a"}},
		{path: "github.com/BurntSushi/toml", version: "v1.0.0", by: []string{"a", "b"}},
		{path: "golang.org/x/net", version: "v0.1.0", by: []string{"b"}},
	}
	text, err := render(mods, cache, goroot)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"The Go standard library and runtime, go1.26.0 (in a)", "Go's license",
		"github.com/BurntSushi/toml v1.0.0 (in a, b)", "--- COPYING ---\ntoml's license\n",
		"golang.org/x/net v0.1.0 (in b)", "x/net license", "--- PATENTS ---\nx/net patents",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("notices lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "not a license") {
		t.Errorf("notices ship a README:\n%s", text)
	}
}

// A module without a license file, or missing from the cache, fails the run and is named: the
// notices exist so nothing ships without its license.
func TestRenderRefusesAModuleWithoutALicense(t *testing.T) {
	cache, goroot := t.TempDir(), t.TempDir()
	write(t, filepath.Join(goroot, "LICENSE"), "Go's license\n")
	write(t, filepath.Join(cache, "example.com/nolicense@v1.0.0/main.go"), "package x\n")
	mods := []*module{
		{path: "std", version: "go1.26.0"},
		{path: "example.com/nolicense", version: "v1.0.0"},
		{path: "example.com/absent", version: "v2.0.0"},
	}
	_, err := render(mods, cache, goroot)
	if err == nil {
		t.Fatal("render passed with modules that ship no license")
	}
	for _, want := range []string{"2 linked module(s)", "example.com/nolicense v1.0.0: no LICENSE", "example.com/absent v2.0.0", "go mod download"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// On a real binary: every module its build information lists gets a section with a license text
// from the module cache the build used.
func TestNoticesOfARealBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fstack-cni")
	build := exec.Command("go", "build", "-o", bin, "../../../cni/cmd/fstack-cni")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build fstack-cni: %v\n%s", err, out)
	}
	out := filepath.Join(t.TempDir(), "NOTICES")
	if err := run([]string{"-o", out, bin}, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := linked([]string{bin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) < 3 {
		t.Fatalf("fstack-cni links %d modules by its build information, want the standard library and its dependencies", len(mods))
	}
	for _, m := range mods {
		head := m.path + " " + m.version + " (in fstack-cni)"
		if m.path == "std" {
			head = "The Go standard library and runtime, " + m.version + " (in fstack-cni)"
		}
		if !strings.Contains(string(b), "\n"+head+"\n") {
			t.Errorf("no section %q in the notices", head)
		}
		if m.path == "github.com/kube-fstack/kube-fstack" {
			t.Errorf("the main module is listed as third-party")
		}
	}
}
