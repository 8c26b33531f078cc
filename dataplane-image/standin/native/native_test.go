package native_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/native"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/program"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

func TestParseArgsAsGetoptLong(t *testing.T) {
	for _, argv := range [][]string{
		{"--verbose", "--conf", "/c.ini", "--proc-type=secondary", "--proc-id=1"},
		{"--conf=/c.ini", "--verbose", "-t", "secondary", "-p1"},
		{"-c/c.ini", "--proc-id", "1", "--proc-type", "secondary", "--verbose"},
	} {
		a, err := native.ParseArgs(argv)
		if err != nil || a.Conf != "/c.ini" || a.Primary || a.ProcID != 1 || !slices.Equal(a.Own, []string{"--verbose"}) {
			t.Errorf("%q: got %+v, %v", argv, a, err)
		}
	}
	if _, err := native.ParseArgs([]string{"--proc-id=0"}); err == nil || !strings.Contains(err.Error(), "--conf") {
		t.Errorf("no --conf: got %v", err)
	}
	if _, err := native.ParseArgs([]string{"--conf", "/c", "--proc-type=leader"}); err == nil {
		t.Error("an unknown proc-type must be refused, as ff_init does")
	}
}

// The stand-in program, reading config.ini as F-Stack does, runs testpmd with exactly the EAL
// argv the supervisor's program mode gives it from the renderer (the stand-in image's adapter
// mode): both play F-Stack's dpdk_args_setup, one from the file, one from the spec.
func TestTestpmdMatchesProgramMode(t *testing.T) {
	si := fixtures.StackInstance("vhost", fixtures.WithProcesses(2), fixtures.WithVhostPort("data", "net1", 2), fixtures.WithShim(false))
	checked, errs := render.Prepare(&si.Spec)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	facts := render.PlaceholderFacts(checked)
	facts.DataplaneCPUs = []int{2, 5}
	res, err := render.Render(checked, facts)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "config.ini")
	if err := os.WriteFile(conf, res.Config, 0o644); err != nil {
		t.Fatal(err)
	}
	l := program.Program{Program: "testpmd", LcoresPerProc: 2, PrimaryArgs: []string{"x"}, SecondaryArgs: []string{"x"}}
	for k := range 2 {
		want, err := l.Argv(res, k)
		if err != nil {
			t.Fatal(err)
		}
		want = want[:slices.Index(want, "--")]
		got, err := native.Testpmd("testpmd", &native.Args{Conf: conf, ProcID: k, Primary: k == 0})
		if err != nil {
			t.Fatal(err)
		}
		if eal := got[:slices.Index(got, "--")]; !slices.Equal(eal, want) {
			t.Errorf("process %d:\n got %q\nwant %q", k, eal, want)
		}
		if !slices.Contains(got, "--proc-id="+string(rune('0'+k))) || !slices.Contains(got, "--num-procs=2") ||
			!slices.Contains(got, "--no-lsc-interrupt") {
			t.Errorf("process %d: testpmd's own arguments: %q", k, got)
		}
	}
	if _, err := native.Testpmd("testpmd", &native.Args{Conf: conf, ProcID: 2}); err == nil {
		t.Error("proc-id 2 of a 2-process config must be refused")
	}
}

// The stand-in of F-Stack's Nginx reads worker_processes and fstack_conf as nginx does: -g
// first, then the file, a directive in both refused as duplicate, none at all "fstack_conf null".
func TestReadNginx(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte("fstack_conf f-stack.ini;\nevents {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := native.ReadNginx([]string{"nginx", "-c", conf, "-g", "worker_processes 2; daemon off;"})
	if err != nil || n.Workers != 2 || n.Conf != filepath.Join(dir, "f-stack.ini") || n.Daemon {
		t.Fatalf("got %+v, %v", n, err)
	}
	if _, err := native.ReadNginx([]string{"nginx", "-c", conf, "-g", "fstack_conf /x;"}); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("fstack_conf in -g and the file: got %v", err)
	}
	if err := os.WriteFile(conf, []byte("events {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := native.ReadNginx([]string{"nginx", "-c", conf}); err == nil || err.Error() != "fstack_conf null" {
		t.Errorf("no fstack_conf: got %v", err)
	}
}

// Lcores sharing a CPU (lab option): the stand-in reads KUBE_FSTACK_LCORE_CPUS as patch 0003 does
// and runs testpmd on the CPU it names, as program mode does from the renderer's argv; without
// the variable it builds F-Stack's -c of lcore 127, which no CPU of a one-CPU container is, and
// fails. Its Nginx passes the variable to a worker only through an env directive, as nginx does.
func TestTestpmdHonoursTheLcoreCPUs(t *testing.T) {
	si := fixtures.StackInstance("vhost", fixtures.WithProcesses(2), fixtures.WithVhostPort("data", "net1", 2), fixtures.WithShim(false))
	si.Spec.DPDK.LcoresPerCPU = 2
	checked, errs := render.Prepare(&si.Spec)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	facts := render.PlaceholderFacts(checked)
	facts.DataplaneCPUs = []int{3}
	res, err := render.Render(checked, facts)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "config.ini")
	if err := os.WriteFile(conf, res.Config, 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{res.FStackEnv[0].Name: res.FStackEnv[0].Value}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	l := program.Program{Program: "testpmd", LcoresPerProc: 2, PrimaryArgs: []string{"x"}, SecondaryArgs: []string{"x"}}
	for k := range 2 {
		want, err := l.Argv(res, k)
		if err != nil {
			t.Fatal(err)
		}
		want = want[:slices.Index(want, "--")]
		a := &native.Args{Conf: conf, ProcID: k, Primary: k == 0}
		got, err := native.Testpmd("testpmd", a.WithLcoreCPUs(lookup))
		if err != nil {
			t.Fatal(err)
		}
		if eal := got[:slices.Index(got, "--")]; !slices.Equal(eal, want) || eal[1] != "--lcores=0@3,1@3" {
			t.Errorf("process %d:\n got %q\nwant %q", k, eal, want)
		}
	}
	a := &native.Args{Conf: conf, ProcID: 1}
	if _, err := native.Testpmd("testpmd", a.WithLcoreCPUs(func(string) (string, bool) { return "", false })); err == nil {
		t.Error("without KUBE_FSTACK_LCORE_CPUS process 1 has lcore 127's -c and must fail")
	}

	nginxConf := filepath.Join(t.TempDir(), "nginx.conf")
	if err := os.WriteFile(nginxConf, []byte("fstack_conf /c.ini;\nevents {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for g, kept := range map[string]bool{"": false, "env KUBE_FSTACK_LCORE_CPUS;": true, "env KUBE_FSTACK_LCORE_CPUS=9,9;": false} {
		n, err := native.ReadNginx([]string{"nginx", "-c", nginxConf, "-g", g})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := n.WorkerEnv(lookup)("KUBE_FSTACK_LCORE_CPUS"); ok != kept {
			t.Errorf("-g %q: a worker sees the variable %v, want %v", g, ok, kept)
		}
	}
}
