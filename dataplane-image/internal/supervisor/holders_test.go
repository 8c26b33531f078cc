package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// holdShared runs `flock --shared file sleep`, which holds a shared flock on file as a DPDK
// secondary holds one on each fbarray_* file of its primary, dead or alive.
func holdShared(t *testing.T, file string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Fatal("flock (util-linux) is needed: hack/install-deps.sh")
	}
	cmd := exec.Command("flock", "--shared", file, "sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the lock lives on in sleep
	mustDo(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	eventually(t, "the shared lock", func() bool { return flockHeld(filepath.Dir(file), filepath.Base(file)) })
	return cmd
}

// A new primary waits for the previous generation's secondaries to let go of its runtime files,
// names them while it waits, and starts once they are gone.
func TestNewPrimaryWaitsForTheOldSecondaries(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	h.writeDevinfo()
	rt := filepath.Join(h.paths.RuntimeDir, DefaultPrefix)
	mustDo(t, os.MkdirAll(rt, 0o755))
	memzone := filepath.Join(rt, "fbarray_memzone")
	mustDo(t, os.WriteFile(memzone, nil, 0o600))
	holder := holdShared(t, memzone)

	s := h.supervisor("primary", "secondary")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res := run(s, ctx)
	want := fmt.Sprintf("fbarray_memzone held by pid %d (flock)", holder.Process.Pid)
	eventually(t, "the wait naming the holder", func() bool {
		return strings.Contains(h.logLine("waiting for the previous generation's DPDK secondaries to exit")["holders"], want)
	})
	if h.logged("starting process", logging.KeyProcess, 0) {
		t.Fatalf("the primary started while a secondary of the previous one held its files:\n%s", h.log.String())
	}
	mustDo(t, syscall.Kill(-holder.Process.Pid, syscall.SIGTERM))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("supervisor log:\n%s", h.log.String())
		}
	})
	eventually(t, "ready", func() bool { return h.shimFile(podcontract.ReadyFile) == "1" })
	if !h.logged("the previous generation's secondaries are gone", "elapsed", "") {
		t.Errorf("the log does not say the wait ended:\n%s", h.log.String())
	}
	stop()
	mustDo(t, waitResult(t, res))
}

// Secondaries that do not go fail the start, bounded, naming them.
func TestOldSecondariesThatStayFailTheStart(t *testing.T) {
	h := newHarness(t, vhostSpec(1))
	h.writeDevinfo()
	rt := filepath.Join(h.paths.RuntimeDir, DefaultPrefix)
	mustDo(t, os.MkdirAll(rt, 0o755))
	seg := filepath.Join(rt, "fbarray_memseg-2048k-0-0")
	mustDo(t, os.WriteFile(seg, nil, 0o600))
	holder := holdShared(t, seg)
	s := h.supervisor("primary", "secondary")
	s.Cfg.Timing.SecondariesTimeout = 300 * time.Millisecond
	err := waitResult(t, run(s, context.Background()))
	want := fmt.Sprintf("fbarray_memseg-2048k-0-0 held by pid %d (flock)", holder.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Cannot allocate memzone list") {
		t.Fatalf("got %v, want the start refused naming %q", err, want)
	}
	if h.logged("starting process", logging.KeyProcess, 0) {
		t.Errorf("a primary was started anyway:\n%s", h.log.String())
	}
}
