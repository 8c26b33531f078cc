// Package hack_test runs the developer scripts under hack/ that a newcomer meets first (make run,
// make test-fuzz, make cluster-down) against stand-ins for what they wait on: a lock held with
// flock(1) in place of another apt, a fake `go` in place of the fuzz engine, a canned
// `iptables -S` in place of the node's rules. No root, no network.
package hack_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// holdLock stands for apt-daily holding /var/lib/apt/lists/lock: flock(1) holds path until the
// test kills it. apt takes fcntl locks, flock(1) flock locks; /proc/locks (lslocks) lists both.
func holdLock(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	for _, tool := range []string{"flock", "lslocks"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s (util-linux) is needed: hack/install-deps.sh installs it", tool)
		}
	}
	writeFile(t, path, "", 0o644)
	holder := exec.Command("flock", path, "sh", "-c", "echo held; exec sleep 3600")
	// flock runs the command as its child, which inherits the lock: killing flock alone left
	// the sleep holding the lock for an hour (and any lock fd the test's own parent held). The
	// holder gets a process group of its own, and the cleanup kills the group.
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL)
		_ = holder.Wait()
	})
	// flock takes the lock before it runs the command, so the command's line says it is held.
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("flock %s did not take the lock: %q, %v", path, line, err)
	}
	return holder
}

// A held apt lock makes the wait visible (the holder named, again while it lasts) and, once it is
// released, the wait ends and apt-get runs. On main, install-deps.sh ran apt-get update at once,
// which fails on the lists lock whatever DPkg::Lock::Timeout says.
func TestAptWaitsForAHeldLockAndNamesItsHolder(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "lists", "lock")
	holder := holdLock(t, lock)

	// A fake apt-get records that it ran, so the test sees apt_get reach it only after the wait.
	bin := filepath.Join(dir, "bin")
	ran := filepath.Join(dir, "apt-get-ran")
	writeFile(t, filepath.Join(bin, "apt-get"), "#!/bin/sh\necho \"$@\" >"+ran+"\necho fake apt-get done\n", 0o755)

	cmd := exec.Command("bash", "-c", `source "$1/hack/lib/apt.sh" && apt_get update -qq`, "_", repoRoot(t))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"),
		"APT_LOCK_FILES="+lock+" "+filepath.Join(dir, "absent"), "APT_LOCK_REPORT_EVERY=1", "APT_LOCK_WAIT=3600")
	stderr, stdout := startReadingStderr(t, cmd)
	// Two messages while the lock is held, each naming the holder; then the lock goes.
	sc := bufio.NewScanner(stderr)
	want := "pid " + strconv.Itoa(holder.Process.Pid) + " (flock) holds " + lock
	var seen []string
	for len(seen) < 2 && sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "waiting for another apt") {
			t.Errorf("unexpected line while the lock is held: %q", line)
			continue
		}
		if !strings.Contains(line, want) {
			t.Errorf("wait message %q does not name the holder (%q)", line, want)
		}
		seen = append(seen, line)
	}
	if len(seen) < 2 {
		t.Fatalf("want two wait messages while the lock is held, got %q", seen)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("apt-get ran while the lock was held")
	}
	_ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL) // flock and the sleep holding the lock with it
	_ = holder.Wait()
	rest, _ := io.ReadAll(stderr)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("apt_get after the lock was released: %v\n%s", err, rest)
	}
	args, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal("apt-get did not run after the lock was released")
	}
	if !strings.Contains(string(args), "DPkg::Lock::Timeout=3600 update -qq") {
		t.Errorf("apt-get args %q: want the lock timeout and update -qq", args)
	}
	if !strings.Contains(stdout.String(), "fake apt-get done") {
		t.Errorf("apt-get's output is hidden: stdout %q", stdout.String())
	}
}

// The wait is bounded: past APT_LOCK_WAIT it fails, naming the holder and what to do.
func TestAptWaitGivesUpNamingTheHolder(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "lock")
	holder := holdLock(t, lock)
	cmd := exec.Command("bash", "-c", `source "$1/hack/lib/apt.sh" && apt_wait_locks`, "_", repoRoot(t))
	cmd.Env = append(os.Environ(), "APT_LOCK_FILES="+lock, "APT_LOCK_WAIT=0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("apt_wait_locks succeeded with the lock held:\n%s", out)
	}
	for _, want := range []string{"gave up", strconv.Itoa(holder.Process.Pid) + " flock " + lock, "apt-daily"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// apt-get itself may lose the race for the lists lock to another apt after the wait: its
// "Could not get lock" sends it back to waiting rather than failing the run.
func TestAptGetRetriesWhenAnotherAptTakesTheLockFirst(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	count := filepath.Join(dir, "count")
	writeFile(t, filepath.Join(bin, "apt-get"), `#!/bin/sh
n=$(cat "`+count+`" 2>/dev/null || echo 0); n=$((n + 1)); echo $n >"`+count+`"
if [ $n = 1 ]; then echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1 (apt-get)" >&2; exit 100; fi
echo "updated on try $n"
`, 0o755)
	cmd := exec.Command("bash", "-c", `source "$1/hack/lib/apt.sh" && apt_get update`, "_", repoRoot(t))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "APT_LOCK_FILES="+filepath.Join(dir, "none"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("apt_get: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "updated on try 2") || !strings.Contains(string(out), "waiting again") {
		t.Errorf("want a second try after the lock error:\n%s", out)
	}
}

// make run's first step failing as on a fresh VM whose apt-daily outlasts the wait: the step's
// own output is shown (main sent it to /dev/null) and the run ends naming the step. run.sh runs
// from a copy of the tree whose install-deps.sh is a stand-in that fails as apt does.
func TestRunNamesTheFailedStepAndShowsItsOutput(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("hack/run.sh refuses to start unless root (make test runs as root)")
	}
	tree := t.TempDir()
	for _, f := range []string{"run.sh", "cluster/lib.sh"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "hack", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(tree, "hack", f), string(b), 0o755)
	}
	writeFile(t, filepath.Join(tree, "hack", "install-deps.sh"), `#!/bin/sh
echo "install-deps: apt-get install containerd"
echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
exit 100
`, 0o755)
	out, err := exec.Command(filepath.Join(tree, "hack", "run.sh")).CombinedOutput()
	if err == nil {
		t.Fatalf("run.sh succeeded with install-deps failing:\n%s", out)
	}
	for _, want := range []string{
		"E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242",
		"make run: FAILED (exit 100) at step: 1/6 packages and helm (TOOLS=tools-run hack/install-deps.sh --cluster)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("run.sh output lacks %q:\n%s", want, out)
		}
	}
}

// startReadingStderr starts cmd with its stderr as a pipe the test reads while it runs (lines a
// script prints during a wait) and its stdout collected for after.
func startReadingStderr(t *testing.T, cmd *exec.Cmd) (io.ReadCloser, *strings.Builder) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := &strings.Builder{}
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stderr, stdout
}
