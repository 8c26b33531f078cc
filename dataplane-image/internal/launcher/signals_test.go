package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/test/syncbuf"
)

// waitingLauncher runs a launcher whose dataplane is not ready yet, so no app runs, until it logs
// that it waits (its signals are its own by then).
func waitingLauncher(t *testing.T, script string) (*Launcher, string, *syncbuf.Buffer, chan int) {
	t.Helper()
	l, dir, _ := newTest(t, 0)
	log := &syncbuf.Buffer{}
	l.Log, l.WaitTimeout = log, time.Minute
	res := make(chan int, 1)
	go func() { res <- l.Run(context.Background(), []string{"sh", "-c", script}) }()
	waitFor(t, "the launcher waiting for the dataplane", func() bool {
		return strings.Contains(log.String(), "waiting for the F-Stack dataplane to report ready")
	})
	return l, dir, log, res
}

// A reload asked for while no app runs (the launcher waits for the dataplane, as during a restart
// in place) changes nothing: the app reads its configuration when it starts. On main the SIGHUP
// met Go's default action there and ended the launcher, and with it this test binary.
func TestASIGHUPWhileNoAppRunsIsHarmless(t *testing.T) {
	started := filepath.Join(t.TempDir(), "started")
	_, dir, log, res := waitingLauncher(t, "touch "+started)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the SIGHUP noted", func() bool { return strings.Contains(log.String(), "SIGHUP while the app is not running") })
	ready(t, dir, "1")
	select {
	case code := <-res:
		if code != 0 {
			t.Fatalf("exit code %d, want the app's 0:\n%s", code, log)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the app did not run after the SIGHUP:\n%s", log)
	}
	if _, err := os.Stat(started); err != nil {
		t.Errorf("the app did not start: %v", err)
	}
}

// A SIGTERM while the launcher waits for the dataplane stops it at once, with 128+15 as a shell
// reports a command it stopped, and starts nothing: the container is being stopped.
func TestASIGTERMWhileNoAppRunsEndsTheWait(t *testing.T) {
	never := filepath.Join(t.TempDir(), "never")
	l, dir, log, res := waitingLauncher(t, "touch "+never)
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-res:
		if code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit code %d, want %d:\n%s", code, 128+int(syscall.SIGTERM), log)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the launcher still waits 10 s after SIGTERM (its wait is %s):\n%s", l.WaitTimeout, log)
	}
	if !strings.Contains(log.String(), "stopped before the app started") {
		t.Errorf("the log does not say why it stopped:\n%s", log)
	}
	// Ready now: a launcher that went on waiting would start the app.
	ready(t, dir, "1")
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(never); err == nil {
		t.Errorf("the app started after the SIGTERM")
	}
}
