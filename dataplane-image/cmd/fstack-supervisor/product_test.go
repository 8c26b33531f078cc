package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The stand-in image's flags (dataplane-image/standin/cmd/fstack-supervisor): they make the
// supervisor start DPDK's testpmd in place of F-Stack, or invent devices and contexts, which the
// real image must never be told to do.
var standinFlags = []string{"program-mode", "program", "secondary-program", "primary-args", "secondary-args",
	"program-lcores-per-proc", "standin-pci-vdev", "standin-contexts-delay"}

func goTool(t *testing.T) string {
	t.Helper()
	g, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test builds the supervisor with the go tool, which is not on PATH: %v (export PATH=/usr/local/go/bin:$PATH)", err)
	}
	return g
}

// The binary the real image carries, built as its Dockerfile builds it, offers none of the
// stand-in's flags, and its --shim-contexts knows no stand-in.
func TestProductBinaryHasNoStandinFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fstack-supervisor")
	build := exec.Command(goTool(t), "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	help := string(out)
	if !strings.Contains(help, "-native") || !strings.Contains(help, "-shim-contexts") {
		t.Fatalf("--help does not list the product's flags (-native, -shim-contexts): not the output this test reads\n%s", help)
	}
	for _, f := range standinFlags {
		if strings.Contains(help, "\n  -"+f+" ") || strings.Contains(help, "\n  -"+f+"\n") {
			t.Errorf("the product supervisor offers the stand-in's flag --%s", f)
		}
	}
	// Nor their code: the slot files' name and the PCI substitute's log line are the stand-in's.
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"kube_fstack_standin_contexts_", "stand-in: PCI ", "program-lcores-per-proc"} {
		if bytes.Contains(data, []byte(code)) {
			t.Errorf("the product supervisor's binary holds %q: the stand-in's code is linked", code)
		}
	}
	if out, err := exec.Command(bin, "--shim-contexts=standin", "--spec-file=/nonexistent", "--listen=127.0.0.1:0").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "--shim-contexts=standin") {
		t.Errorf("the product supervisor accepted --shim-contexts=standin (exit %v):\n%s", err, out)
	}
}

// The product's main links no package of the stand-in (dataplane-image/standin/...): the seam
// (supervisor.Programs, Config.ContextKinds, cli.Extension) is filled only by the stand-in's main.
func TestProductLinksNoStandin(t *testing.T) {
	out, err := exec.Command(goTool(t), "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	pkgs := strings.Fields(string(out))
	if !containsSuffix(pkgs, "/dataplane-image/internal/supervisor") {
		t.Fatalf("go list -deps does not list the supervisor package: not the listing this test reads\n%s", out)
	}
	for _, p := range pkgs {
		if strings.Contains(p, "/dataplane-image/standin/") || strings.HasSuffix(p, "/dataplane-image/standin") {
			t.Errorf("the product supervisor links %s: stand-in code belongs to the stand-in image's main only", p)
		}
	}
}

func containsSuffix(ss []string, suffix string) bool {
	for _, s := range ss {
		if strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}
