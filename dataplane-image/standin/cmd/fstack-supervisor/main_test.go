package main

import (
	"flag"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/program"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/slots"
)

func configure(args ...string) (*supervisor.Config, error) {
	s := &standin{}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	s.Flags(fs)
	native := fs.String("native", "", "the product's flag, as cli sets Launch.Native from it")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	cfg := &supervisor.Config{ShimContexts: slots.Kind}
	cfg.Launch.Native = fsv1.ProgramMode(*native)
	return cfg, s.Configure(cfg)
}

// The PCI substitution is program mode's: with F-Stack, which reads config.ini, it would be a lie.
func TestStandinPCIOnlyInProgramMode(t *testing.T) {
	if _, err := configure("--standin-pci-vdev=net_null"); err == nil || !strings.Contains(err.Error(), "--program-mode") {
		t.Fatalf("F-Stack mode with --standin-pci-vdev: got %v, want it refused naming --program-mode", err)
	}
	if _, err := configure("--program-mode"); err == nil || !strings.Contains(err.Error(), "--program") {
		t.Fatalf("--program-mode alone: got %v, want --program asked for", err)
	}
	cfg, err := configure("--program-mode", "--program=x", "--standin-pci-vdev=net_null", "--primary-args=--proc-id={proc}")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := cfg.Launch.Programs.(*program.Program)
	if !ok || p.Program != "x" || p.PCI == nil || p.PCI.Driver != "net_null" || len(p.PrimaryArgs) != 1 {
		t.Fatalf("program mode: %+v", cfg.Launch.Programs)
	}
	if err := cfg.CheckShimContexts(); err != nil {
		t.Errorf("the stand-in's --shim-contexts=%s: %v", slots.Kind, err)
	}
	if _, err := configure("--program-mode", "--program=x", "--native=PerProcess"); err == nil || !strings.Contains(err.Error(), "--native and --program-mode") {
		t.Errorf("--native with --program-mode: got %v, want a refusal naming both", err)
	}
	if cfg, err := configure(); err != nil || cfg.Launch.Programs != nil {
		t.Errorf("without --program-mode the stand-in starts what the product starts: %v %+v", err, cfg)
	}
}

// The stand-in image's binary keeps every flag its recipe (hack/image-dataplane-standin.sh) and
// the dataplane tier give it, beside the product's.
func TestStandinBinaryHasItsFlags(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test builds the supervisor with the go tool, which is not on PATH: %v (export PATH=/usr/local/go/bin:$PATH)", err)
	}
	bin := filepath.Join(t.TempDir(), "fstack-supervisor")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	for _, f := range []string{"program-mode", "program", "secondary-program", "primary-args", "secondary-args",
		"program-lcores-per-proc", "standin-pci-vdev", "standin-contexts-delay", "native", "shim-contexts", "spec-file"} {
		if !strings.Contains(string(out), "\n  -"+f+" ") && !strings.Contains(string(out), "\n  -"+f+"\n") {
			t.Errorf("the stand-in supervisor lacks --%s:\n%s", f, out)
		}
	}
}
