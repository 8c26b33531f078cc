package launcher

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The dataplane is played by files in a temp dir (what the supervisor writes); the app is a
// real child process.
func newTest(t *testing.T, cpus ...int) (*Launcher, string, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	// The app-state volume as the dataplane sees it; the launcher gets its own directory.
	state := filepath.Join(t.TempDir(), "nginx")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	l := &Launcher{
		ShimDir: dir, StateDir: state, Container: "nginx", WaitTimeout: 5 * time.Second, Poll: 20 * time.Millisecond,
		Grace: 2 * time.Second, CPUs: func() ([]int, error) { return cpus, nil }, Log: &log,
	}
	return l, dir, &log
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunsCommandWithLcoreOfOwnCPU(t *testing.T) {
	l, dir, _ := newTest(t, 5, 7)
	write(t, dir, podcontract.GenerationFile, "3\n")
	write(t, dir, podcontract.ReadyFile, "3\n")
	out := filepath.Join(dir, "env")
	code := l.Run(context.Background(), []string{"sh", "-c", `echo "$` + podcontract.EnvShimInitialLcore + `" > ` + out + `; exit 4`})
	if code != 4 {
		t.Fatalf("exit code %d, want the command's 4", code)
	}
	got, _ := os.ReadFile(out)
	if strings.TrimSpace(string(got)) != "0x20" {
		t.Fatalf("%s = %q, want 0x20 (CPU 5)", podcontract.EnvShimInitialLcore, got)
	}
	rec, _ := os.ReadFile(filepath.Join(l.StateDir, podcontract.AppStartedFile))
	if strings.TrimSpace(string(rec)) != "3" {
		t.Fatalf("recorded generation %q, want 3", rec)
	}
}

func TestWaitsForTheDataplane(t *testing.T) {
	l, dir, log := newTest(t, 1)
	write(t, dir, podcontract.GenerationFile, "1\n")
	write(t, dir, podcontract.ReadyFile, "0\n") // a previous generation's marker is not ready
	go func() {
		time.Sleep(150 * time.Millisecond)
		write(t, dir, podcontract.ReadyFile, "1\n")
	}()
	start := time.Now()
	if code := l.Run(context.Background(), []string{"true"}); code != 0 {
		t.Fatalf("exit code %d, log:\n%s", code, log)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Fatal("the command ran before the dataplane reported its generation ready")
	}
}

func TestGivesUpWithAClearMessage(t *testing.T) {
	l, _, log := newTest(t, 1)
	l.WaitTimeout = 100 * time.Millisecond
	if code := l.Run(context.Background(), []string{"true"}); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !strings.Contains(readable(t, log.String()), "did not report ready") || !strings.Contains(readable(t, log.String()), podcontract.DataplaneContainer) {
		t.Fatalf("log does not say what to look at:\n%s", log)
	}
}

func TestStopsTheAppWhenTheDataplaneRestarts(t *testing.T) {
	l, dir, log := newTest(t, 2)
	write(t, dir, podcontract.GenerationFile, "1\n")
	write(t, dir, podcontract.ReadyFile, "1\n")
	go func() {
		time.Sleep(200 * time.Millisecond)
		write(t, dir, podcontract.GenerationFile, "2\n")
	}()
	code := l.Run(context.Background(), []string{"sleep", "30"})
	if code != ExitDataplaneRestarted {
		t.Fatalf("exit code %d, want %d; log:\n%s", code, ExitDataplaneRestarted, log)
	}
	if !strings.Contains(readable(t, log.String()), "dataplane restarted") {
		t.Fatalf("log does not say why:\n%s", log)
	}
}

func TestKillsAnAppThatIgnoresSIGTERM(t *testing.T) {
	l, dir, _ := newTest(t, 2)
	l.Grace = 100 * time.Millisecond
	write(t, dir, podcontract.GenerationFile, "1\n")
	write(t, dir, podcontract.ReadyFile, "1\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Stop only once the app ignores SIGTERM: a fixed delay raced the shell's trap on a busy
	// machine, and SIGTERM then ended it (143).
	trapped := filepath.Join(t.TempDir(), "trapped")
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(trapped); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	code := l.Run(ctx, []string{"sh", "-c", "trap '' TERM; : > " + trapped + "; sleep 30 & wait; sleep 30"})
	if code != 128+9 {
		t.Fatalf("exit code %d, want 137 (SIGKILL after the grace period)", code)
	}
}

func TestNoCommand(t *testing.T) {
	l, _, log := newTest(t, 1)
	if code := l.Run(context.Background(), nil); code != 2 || !strings.Contains(readable(t, log.String()), "usage") {
		t.Fatalf("exit code %d, log %q", code, log)
	}
}

// When the generation moves, the app's primary is gone and the new one cannot start while the
// app (a secondary of the dead one) holds its runtime files: the app gets MovedGrace, not the
// long grace of a normal stop, before its process group is killed.
func TestAppOfADeadPrimaryGetsTheShortGrace(t *testing.T) {
	l, dir, log := newTest(t, 2)
	l.Grace, l.MovedGrace = time.Minute, 100*time.Millisecond
	write(t, dir, podcontract.GenerationFile, "1\n")
	write(t, dir, podcontract.ReadyFile, "1\n")
	time.AfterFunc(200*time.Millisecond, func() { write(t, dir, podcontract.GenerationFile, "2\n") })
	res := make(chan int, 1)
	go func() {
		res <- l.Run(context.Background(), []string{"sh", "-c", "trap '' TERM; sleep 60 & wait; sleep 60"})
	}()
	select {
	case code := <-res:
		if code != ExitDataplaneRestarted {
			t.Fatalf("exit code %d, want %d; log:\n%s", code, ExitDataplaneRestarted, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the app of a dead primary still runs 30 s after the generation moved: it got the normal stop's grace (%s), not MovedGrace", l.Grace)
	}
}

// A FIFO where the dataplane's generation marker belongs does not block the launcher: it reads
// no marker and gives up after its wait, naming the file. On main the read of the FIFO blocked
// for good. (Since the shim dir became read-only to the app containers only the dataplane can
// put anything there; the read stays bounded and non-blocking all the same.)
func TestAFIFOAsTheGenerationDoesNotBlock(t *testing.T) {
	l, dir, log := newTest(t, 0)
	l.WaitTimeout = 200 * time.Millisecond
	if err := syscall.Mkfifo(filepath.Join(dir, podcontract.GenerationFile), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, dir, podcontract.ReadyFile, "1\n")
	done := make(chan int)
	go func() { done <- l.Run(context.Background(), []string{"true"}) }()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(readable(t, log.String()), "did not report ready") {
			t.Fatalf("exit %d; log:\n%s", code, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the launcher hung on a FIFO planted as the generation marker")
	}
}

// Without its directory of the app-state volume (a pod injected by an older kube-fstack) the
// launcher says what is missing and starts nothing.
func TestRefusesWithoutItsStateDir(t *testing.T) {
	l, dir, log := newTest(t, 0)
	l.StateDir = filepath.Join(dir, "missing")
	if code := l.Run(context.Background(), []string{"true"}); code != ExitConfig || !strings.Contains(readable(t, log.String()), "has no "+podcontract.AppStateVolume+" volume at "+l.StateDir) {
		t.Fatalf("exit %d; log:\n%s", code, log)
	}
	if _, err := os.Stat(l.StateDir); err == nil {
		t.Fatal("the launcher made the directory itself, where the dataplane never looks")
	}
}

// A process of the app that outlives it (an Nginx worker whose master exited at once, as when the
// master's EAL initialisation failed against a primary killed a moment before) is killed when
// the generation moves: as a secondary of the dead primary it holds the old generation's runtime
// files, and the new primary waits for them. On real F-Stack, before this, the launcher started
// the new app while the worker lived on; the dataplane waited for it until the kubelet's
// liveness probe restarted the container, 44 s after the primary was killed.
func TestAppLeftoversDieWhenTheGenerationMoves(t *testing.T) {
	l, dir, log := newTest(t, 2)
	l.MovedGrace = 100 * time.Millisecond
	write(t, dir, podcontract.GenerationFile, "1\n")
	write(t, dir, podcontract.ReadyFile, "1\n")
	child := filepath.Join(t.TempDir(), "child")
	time.AfterFunc(300*time.Millisecond, func() { write(t, dir, podcontract.GenerationFile, "2\n") })
	// The first process exits on SIGTERM at once; its child ignores SIGTERM (as sleep does,
	// inheriting the ignored signal) and stays in the app's process group.
	code := l.Run(context.Background(), []string{"sh", "-c",
		`sh -c "trap '' TERM; echo \$\$ > ` + child + `.tmp; mv ` + child + `.tmp ` + child + `; sleep 60" & wait`})
	if code != ExitDataplaneRestarted {
		t.Fatalf("exit code %d, want %d; log:\n%s", code, ExitDataplaneRestarted, log)
	}
	b, err := os.ReadFile(child)
	if err != nil {
		t.Fatalf("the app's child never started: %v; log:\n%s", err, log)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the app's child %d outlived the app's stop when the generation moved; log:\n%s", pid, log)
	}
	if !strings.Contains(log.String(), "outlived it were killed") {
		t.Fatalf("the launcher did not say it killed the leftovers; log:\n%s", log)
	}
}

// alive says whether pid runs (a zombie waiting for init to reap it does not).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
