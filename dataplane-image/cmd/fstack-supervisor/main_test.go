package main

import (
	"strings"
	"testing"
)

// An argument the supervisor does not know (a hook naming a subcommand an older image lacks)
// fails the start instead of starting a second dataplane beside the first.
func TestParseFlagsRefusesArguments(t *testing.T) {
	if _, err := parseFlags([]string{"--program-mode", "--program=x", "wait-placd"}); err == nil || !strings.Contains(err.Error(), `"wait-placd"`) {
		t.Fatalf("got %v, want the unknown argument named", err)
	}
	if _, err := parseFlags([]string{"--program-mode", "--program=x"}); err != nil {
		t.Fatalf("flags alone: %v", err)
	}
}

// The PCI substitution is the stand-in's: the real image (F-Stack mode) refuses the flag.
func TestStandinPCIOnlyInProgramMode(t *testing.T) {
	if _, err := parseFlags([]string{"--standin-pci-vdev=net_null"}); err == nil || !strings.Contains(err.Error(), "--program-mode") {
		t.Fatalf("F-Stack mode with --standin-pci-vdev: got %v, want it refused naming --program-mode", err)
	}
	o, err := parseFlags([]string{"--program-mode", "--program=x", "--standin-pci-vdev=net_null"})
	if err != nil || o.cfg.Launch.PCIStandin == nil || o.cfg.Launch.PCIStandin.Driver != "net_null" {
		t.Fatalf("program mode: %v %+v", err, o)
	}
}

// A native program (spec.program) comes after --native=<mode> --, its own arguments kept.
func TestParseFlagsNative(t *testing.T) {
	o, err := parseFlags([]string{"--ready-telemetry=/mempool/list~ff_msg_pool", "--native=PerProcess", "--", "/opt/hello", "--verbose", "-c", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if l := o.cfg.Launch; l.Native != "PerProcess" || strings.Join(l.NativeArgv, " ") != "/opt/hello --verbose -c x" {
		t.Fatalf("got %q %q", l.Native, l.NativeArgv)
	}
	t.Setenv("FSTACK_APP_PROBES", `{"c":{}}`)
	if o, _ := parseFlags([]string{"--native=Nginx", "--", "nginx"}); o.cfg.AppProbes != "" {
		t.Fatalf("a native program has no app probes to perform, got %q", o.cfg.AppProbes)
	}
	for _, args := range [][]string{
		{"--native=Forking", "--", "x"},
		{"--native=PerProcess"},
		{"--native=PerProcess", "--program-mode", "--program=x", "--", "y"},
	} {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), "--native") {
			t.Errorf("%q: got %v, want a refusal naming --native", args, err)
		}
	}
}
