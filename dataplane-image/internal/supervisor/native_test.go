package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
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
	stop := make(chan struct{})
	res := run(h.nativeSupervisor(fsv1.ProgramPerProcess), stop)
	eventually(t, "the ready marker", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	log := h.log.String()
	conf := h.paths.ConfigFile
	for k, want := range []string{
		"fake native argv: [--verbose --conf " + conf + " --proc-type=primary --proc-id=0]",
		"fake native argv: [--verbose --conf " + conf + " --proc-type=secondary --proc-id=1]",
	} {
		if !strings.Contains(log, "[proc "+string(rune('0'+k))+"] "+want) {
			t.Errorf("process %d: want %q in the log:\n%s", k, want, log)
		}
	}
	if up0, start1 := strings.Index(log, "process 0 is up"), strings.Index(log, "starting process 1"); up0 < 0 || start1 < up0 {
		t.Errorf("the secondary must start after the primary is ready:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(h.paths.ShimDir, podcontract.Launcher)); err == nil {
		t.Error("a native program has no app container: the launcher must not be placed")
	}
	close(stop)
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
			err := waitResult(t, run(s, make(chan struct{})))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
			if strings.Contains(h.log.String(), "starting process 0") {
				t.Fatalf("a process was started:\n%s", h.log)
			}
		})
	}
}
