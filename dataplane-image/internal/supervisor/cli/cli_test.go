package cli

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// An argument the supervisor does not know (a hook naming a subcommand an older image lacks)
// fails the start instead of starting a second dataplane beside the first.
func TestParseFlagsRefusesArguments(t *testing.T) {
	if _, err := parseFlags([]string{"--fstack=/x", "wait-placd"}, nil); err == nil || !strings.Contains(err.Error(), `"wait-placd"`) {
		t.Fatalf("got %v, want the unknown argument named", err)
	}
	if _, err := parseFlags([]string{"--fstack=/x"}, nil); err != nil {
		t.Fatalf("flags alone: %v", err)
	}
}

// A native program (spec.program) comes after --native=<mode> --, its own arguments kept.
func TestParseFlagsNative(t *testing.T) {
	o, err := parseFlags([]string{"--ready-telemetry=/mempool/list~ff_msg_pool", "--native=PerProcess", "--", "/opt/hello", "--verbose", "-c", "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := o.cfg.Launch; l.Native != "PerProcess" || strings.Join(l.NativeArgv, " ") != "/opt/hello --verbose -c x" {
		t.Fatalf("got %q %q", l.Native, l.NativeArgv)
	}
	t.Setenv("FSTACK_APP_PROBES", `{"c":{}}`)
	if o, _ := parseFlags([]string{"--native=Nginx", "--", "nginx"}, nil); o.cfg.AppProbes != "" {
		t.Fatalf("a native program has no app probes to perform, got %q", o.cfg.AppProbes)
	}
	for _, args := range [][]string{
		{"--native=Forking", "--", "x"},
		{"--native=PerProcess"},
	} {
		if _, err := parseFlags(args, nil); err == nil || !strings.Contains(err.Error(), "--native") {
			t.Errorf("%q: got %v, want a refusal naming --native", args, err)
		}
	}
}

// An extension's flags and configuration reach the supervisor's, and --shim-contexts knows
// only the kinds of this build: zone and off in the product, and what an extension adds.
func TestExtension(t *testing.T) {
	if _, err := parseFlags([]string{"--shim-contexts=standin"}, nil); err == nil || !strings.Contains(err.Error(), "--shim-contexts=standin: want one of zone, off") {
		t.Fatalf("the product build: got %v, want --shim-contexts=standin refused naming zone and off", err)
	}
	ext := &testExtension{}
	o, err := parseFlags([]string{"--shim-contexts=slots", "--test-program=/p"}, ext)
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.Launch.Programs == nil || ext.program != "/p" {
		t.Fatalf("the extension's flag and configuration did not reach the supervisor: %+v", o.cfg.Launch)
	}
	if _, err := parseFlags([]string{"--test-program=/p", "--native=PerProcess", "--", "y"}, ext); err == nil || !strings.Contains(err.Error(), "--native") {
		t.Errorf("--native with the extension's programs: got %v, want a refusal naming --native", err)
	}
	if _, err := parseFlags([]string{"--shim-contexts=other"}, ext); err == nil || !strings.Contains(err.Error(), "want one of zone, off, slots") {
		t.Errorf("an unknown kind with an extension: got %v, want the extension's kinds named", err)
	}
}

type testExtension struct{ program string }

func (e *testExtension) Flags(fs *flag.FlagSet) { fs.StringVar(&e.program, "test-program", "", "") }

func (e *testExtension) Configure(cfg *supervisor.Config) error {
	cfg.ContextKinds = map[string]func(string, string) contexts.ContextSource{"slots": func(string, string) contexts.ContextSource { return nil }}
	if e.program != "" {
		cfg.Launch.Programs = testPrograms{}
	}
	return nil
}

type testPrograms struct{}

func (testPrograms) Plan(*render.Result, func(string))          {}
func (testPrograms) Argv(*render.Result, int) ([]string, error) { return nil, nil }

// flagNames records the flags registered before an extension's: the product binary's.
type flagNames struct{ names map[string]bool }

func (f *flagNames) Flags(fs *flag.FlagSet) {
	fs.VisitAll(func(fl *flag.Flag) { f.names[fl.Name] = true })
}
func (f *flagNames) Configure(*supervisor.Config) error { return nil }

// docs/dataplane.md's flags table is hand-written: it names every flag of the product binary and no
// other (the stand-in's flags have a table of their own). A flag added, renamed or moved to the
// stand-in without the table fails here.
func TestDocsFlagsTableIsTheProductsFlags(t *testing.T) {
	got := &flagNames{names: map[string]bool{}}
	_, _ = parseFlags([]string{"--fstack=/x"}, got)
	b, err := os.ReadFile("../../../../docs/dataplane.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n### Flags\n")
	if !ok {
		t.Fatal("docs/dataplane.md has no \"### Flags\" section")
	}
	table, _, _ = strings.Cut(table, "\n#")
	documented := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		cols := strings.Split(line, "|")
		if len(cols) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`--([a-z0-9-]+)").FindAllStringSubmatch(cols[1], -1) {
			documented[m[1]] = true
		}
	}
	for name := range got.names {
		if !documented[name] {
			t.Errorf("--%s is a flag of the product supervisor but not in docs/dataplane.md's flags table", name)
		}
	}
	for name := range documented {
		if !got.names[name] {
			t.Errorf("docs/dataplane.md's flags table names --%s, which the product supervisor does not have", name)
		}
	}
	if len(got.names) < 20 {
		t.Fatalf("only %d flags seen: the extension hook no longer sees the product's flags", len(got.names))
	}
}
