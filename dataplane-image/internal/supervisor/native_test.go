package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// nativeSpec is a StackInstance whose processes are a program linked with libfstack.
func nativeSpec(processes int32, mode fsv1.ProgramMode) *fsv1.StackInstanceSpec {
	s := vhostSpec(processes)
	s.Shim = fsv1.ShimSpec{}
	s.Program = &fsv1.ProgramSpec{Mode: mode}
	return s
}

// nativeSupervisor runs the fake as a native program: NativeArgv is the test binary with its
// own arguments ("--", "native", "--verbose"), to which the supervisor appends F-Stack's.
func (h *harness) nativeSupervisor(mode fsv1.ProgramMode) *Supervisor {
	s := h.supervisor("", "")
	s.Cfg.Launch = Launch{Native: mode, NativeArgv: []string{os.Args[0], "--", "native", "--verbose"}}
	return s
}

// PerProcess: the program is started as F-Stack's start.sh starts it, once per process, its
// own arguments first, then --conf <config.ini> --proc-type --proc-id; the primary first and
// ready before the secondary; no shim is placed; the stop is as for F-Stack's adapter.
func TestNativePerProcessStartsTheProgramAsStartSh(t *testing.T) {
	h := newHarness(t, nativeSpec(2, fsv1.ProgramPerProcess))
	h.writeDevinfo()
	// The image's shim directory has a launcher: a native program must not get it placed.
	mustDo(t, os.WriteFile(filepath.Join(h.paths.ImageShimDir, podcontract.Launcher), []byte("#!/bin/sh\n"), 0o755))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := run(h.nativeSupervisor(fsv1.ProgramPerProcess), ctx)
	eventually(t, "the ready marker", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	log := h.log.String()
	conf := h.paths.ConfigFile
	for k, want := range []string{
		"fake native argv: [--verbose --conf " + conf + " --proc-type=primary --proc-id=0]",
		"fake native argv: [--verbose --conf " + conf + " --proc-type=secondary --proc-id=1]",
	} {
		if !h.logged(want, logging.KeyProcess, k, logging.KeyStream, "output") {
			t.Errorf("process %d: want %q in the log:\n%s", k, want, log)
		}
	}
	if up0, start1 := h.logIndex("process is up", logging.KeyProcess, 0), h.logIndex("starting process", logging.KeyProcess, 1); up0 < 0 || start1 < up0 {
		t.Errorf("the secondary must start after the primary is ready:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(h.paths.ShimDir, podcontract.Launcher)); err == nil {
		t.Error("a native program has no app container: the launcher must not be placed")
	}
	stop()
	if err := waitResult(t, res); err != nil {
		t.Fatalf("a SIGTERM stop must return nil, got %v", err)
	}
}

// The spec snapshot (an annotation anyone who may edit the pod can change) and the
// container's --native must tell the same story.
func TestNativeRefusesASpecThatSaysOtherwise(t *testing.T) {
	for name, c := range map[string]struct {
		spec *fsv1.StackInstanceSpec
		mode fsv1.ProgramMode
		want string
	}{
		"no program in the spec": {vhostSpec(1), fsv1.ProgramPerProcess, "has no spec.program"},
		"another mode":           {nativeSpec(1, fsv1.ProgramNginx), fsv1.ProgramPerProcess, "spec.program.mode Nginx"},
		"program without native": {nativeSpec(1, fsv1.ProgramPerProcess), "", "no --native"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, c.spec)
			h.writeDevinfo()
			s := h.nativeSupervisor(c.mode)
			if c.mode == "" {
				s = h.supervisor("primary", "secondary")
			}
			err := waitResult(t, run(s, context.Background()))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
			if h.logged("starting process", logging.KeyProcess, 0) {
				t.Fatalf("a process was started:\n%s", h.log)
			}
		})
	}
}

// nginxSupervisor runs the fake F-Stack's Nginx master with the configuration conf.
func (h *harness) nginxSupervisor(conf string) *Supervisor {
	path := filepath.Join(h.t.TempDir(), "nginx.conf")
	mustDo(h.t, os.WriteFile(path, []byte(conf), 0o644))
	s := h.supervisor("", "")
	s.Cfg.Launch = Launch{Native: fsv1.ProgramNginx, NativeArgv: []string{os.Args[0], "-c", path}}
	s.Env = append(s.Env, fakeNginxEnv+"=1")
	return s
}

// Nginx: the supervisor adds what the stack decides to the master's command line (-g), starts
// the master alone, and counts its workers as the F-Stack processes: ready once worker 0 is a
// ready primary and worker 1 has joined it; a dead worker ends the dataplane, naming it.
func TestNativeNginxCountsTheMastersWorkers(t *testing.T) {
	h := newHarness(t, nativeSpec(2, fsv1.ProgramNginx))
	h.writeDevinfo()
	sup := h.nginxSupervisor("events {}\n")
	res := run(sup, context.Background())
	eventually(t, "the ready marker", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	log := h.log.String()
	want := `-g" "worker_processes 2; fstack_conf ` + h.paths.ConfigFile + `; daemon off; user root;"`
	if !strings.Contains(h.logLine("fake nginx argv", logging.KeyStream, "output")["msg"], want) {
		t.Errorf("the master's command line lacks %s:\n%s", want, log)
	}
	for _, w := range []struct {
		msg string
		kv  []any
	}{
		{"process is up (an nginx worker)", []any{logging.KeyProcess, 0, logging.KeyPID, ""}},
		{"process is up (an nginx worker)", []any{logging.KeyProcess, 1, logging.KeyPID, ""}},
		{"fake primary pid", []any{logging.KeyProgram, "nginx", logging.KeyStream, "output"}},
		{"fake secondary pid", []any{logging.KeyProgram, "nginx", logging.KeyStream, "output"}},
	} {
		if !h.logged(w.msg, w.kv...) {
			t.Errorf("the log lacks %q with %v:\n%s", w.msg, w.kv, log)
		}
	}
	// Each worker is an F-Stack process on the dashboard's rows too.
	_, body := get(t, sup.handler(), podcontract.MetricsPath)
	for _, want := range []string{`fstack_process_up{process="0"} 1`, `fstack_process_up{process="1"} 1`, "fstack_processes_up 2"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics with both workers up lacks %q:\n%s", want, body)
		}
	}
	pid := h.workerPID(1)
	mustDo(t, syscall.Kill(pid, syscall.SIGKILL))
	err := waitResult(t, res)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("F-Stack process 1 (secondary, nginx worker pid %d) exited", pid)) {
		t.Fatalf("got %v, want the dead worker named", err)
	}
	pid0 := h.workerPID(0)
	eventually(t, "worker 0 stopped with its master", func() bool { _, err := os.Stat("/proc/" + strconv.Itoa(pid0)); return err != nil })
}

// A configuration that cannot serve the stack is refused before anything starts, naming the
// file, the line and what to write.
func TestNativeNginxRefusesAConfigThatCannotWork(t *testing.T) {
	h := newHarness(t, nativeSpec(2, fsv1.ProgramNginx))
	h.writeDevinfo()
	err := waitResult(t, run(h.nginxSupervisor("worker_processes 4;\nevents {}\n"), context.Background()))
	if err == nil || !strings.Contains(err.Error(), `nginx.conf:1: "worker_processes 4"`) || !strings.Contains(err.Error(), `write "worker_processes 2;"`) {
		t.Fatalf("got %v", err)
	}
	if h.logged("starting F-Stack's Nginx master") {
		t.Fatalf("the master was started:\n%s", h.log)
	}
}

// workerPID is the PID the supervisor logged for nginx worker k.
func (h *harness) workerPID(k int) int {
	h.t.Helper()
	l := h.logLine("process is up (an nginx worker)", logging.KeyProcess, k)
	pid, err := strconv.Atoi(l[logging.KeyPID])
	if err != nil {
		h.t.Fatalf("no pid for worker %d in the log (%v):\n%s", k, err, h.log)
	}
	return pid
}

// The generation's context reaches what its steps run: the query of F-Stack's Nginx for its
// build (a relative -c) ends with the generation, as the ready command does.
func TestNginxCommandRunsUnderTheGeneration(t *testing.T) {
	h := newHarness(t, nativeSpec(2, fsv1.ProgramNginx))
	h.writeDevinfo()
	s := h.supervisor("", "")
	var asked context.Context
	s.Cfg.Launch = Launch{Native: fsv1.ProgramNginx, NativeArgv: []string{os.Args[0], "-c", "nginx.conf"},
		NginxBuild: func(ctx context.Context, _ string) (nginxconf.Build, error) {
			asked = ctx
			return nginxconf.Build{}, errors.New("stop here")
		}}
	g := s.newGeneration(context.Background())
	mustDo(t, g.prepare())
	if _, err := g.nginxCommand(); err == nil || !strings.Contains(err.Error(), "stop here") {
		t.Fatalf("nginxCommand: %v, want the build query's error", err)
	}
	if asked == nil {
		t.Fatal("the build was not queried")
	}
	ended := errors.New("the generation ended")
	g.end(ended)
	if !errors.Is(context.Cause(asked), ended) {
		t.Errorf("the build query's context ends with %v, want the generation's cause", context.Cause(asked))
	}
}
