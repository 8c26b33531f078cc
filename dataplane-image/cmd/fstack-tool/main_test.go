package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The real tools are F-Stack's (not built here); a shell script stands in for one: it records
// the CPU it was given and the start and end of its run.
const fakeTool = `#!/bin/sh
echo "start $$ cpu=${KUBE_FSTACK_TOOL_CPU:-unset} args=$*" >>"$LOG"
sleep 0.3
echo "end $$" >>"$LOG"
`

type toolEnv struct {
	wrapper, link, log, shim string
}

func buildWrapper(t *testing.T) toolEnv {
	t.Helper()
	root := t.TempDir()
	tools, lock, shim := filepath.Join(root, "tools"), filepath.Join(root, "run"), filepath.Join(root, "shim")
	for _, d := range []string{tools, lock, shim} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tools, "netstat"), []byte(fakeTool), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "fstack-tool")
	ld := "-X main.toolDir=" + tools + " -X main.lockDir=" + lock + " -X main.shimDir=" + shim
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	link := filepath.Join(root, "ff_netstat")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	return toolEnv{wrapper: bin, link: link, log: filepath.Join(root, "log"), shim: shim}
}

func (e toolEnv) run(t *testing.T, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LOG="+e.log)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out)
	}
}

func (e toolEnv) lines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(e.log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// Two tools at once take each other's replies: the wrapper makes the second wait for the first.
func TestToolsRunOneAtATime(t *testing.T) {
	e := buildWrapper(t)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.run(t, e.link, "-an")
		}()
	}
	wg.Wait()
	lines := e.lines(t)
	if len(lines) != 6 {
		t.Fatalf("want 3 runs, got log:\n%s", strings.Join(lines, "\n"))
	}
	for i := 0; i < len(lines); i += 2 {
		if !strings.HasPrefix(lines[i], "start ") || !strings.HasPrefix(lines[i+1], "end ") {
			t.Fatalf("runs overlapped (a start followed a start):\n%s", strings.Join(lines, "\n"))
		}
		if !strings.HasSuffix(lines[i], "args=-an") {
			t.Fatalf("the tool lost its arguments: %q", lines[i])
		}
	}
}

// The tool's lcore goes on a CPU of its own affinity (-c1 would be CPU 0), off the lcores'
// CPUs the supervisor recorded where the affinity leaves one.
func TestToolRunsOnACPUOfItsAffinity(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Fatal("taskset (util-linux) is needed: apt-get install util-linux")
	}
	e := buildWrapper(t)
	e.run(t, "taskset", "-c", "1", e.link)
	if got := e.lines(t)[0]; !strings.Contains(got, "cpu=1 ") {
		t.Fatalf("under taskset -c 1 the tool got %q, want cpu=1", got)
	}
	p := `{"lcoreCPUs":[0]}`
	if err := os.WriteFile(filepath.Join(e.shim, podcontract.PlacementFile), []byte(p), 0o644); err != nil {
		t.Fatal(err)
	}
	e.run(t, "taskset", "-c", "0,1", e.wrapper, "ff_netstat")
	if got := e.lines(t)[2]; !strings.Contains(got, "cpu=1 ") {
		t.Fatalf("with lcore 0 on CPU 0 the tool got %q, want cpu=1", got)
	}
}

func TestWrapperRefusesWhatIsNoTool(t *testing.T) {
	e := buildWrapper(t)
	for _, argv := range [][]string{{e.wrapper}, {e.wrapper, "ff_../netstat"}, {e.wrapper, "ff_top"}} {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "fstack-tool:") {
			t.Errorf("%v: %v, %s; want a refusal", argv[1:], err, out)
		}
	}
}
