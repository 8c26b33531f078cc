package hack_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A node's nat table after the cluster's rules are gone, as `iptables -t nat -S` prints it: the
// bridge plugin's per-pod chain of a pod killed without CNI DEL (no rule jumps to it), one still
// in use, portmap's shared chains and another user's chain. Debian's mawk has no {24} interval,
// so the awk pattern down.sh used on main never matched and every such chain leaked.
const natRules = `-P PREROUTING ACCEPT
-P POSTROUTING ACCEPT
-N CNI-0a1b2c3d4e5f60718293a4b5
-N CNI-ffffffffffffffffffffffff
-N CNI-HOSTPORT-DNAT
-N CNI-HOSTPORT-MASQ
-N CNI-abc
-N DOCKER
-A POSTROUTING -s 10.244.0.7/32 -m comment --comment "name: \"other\" id: \"x\"" -j CNI-ffffffffffffffffffffffff
-A CNI-ffffffffffffffffffffffff -d 10.244.0.0/24 -j ACCEPT
`

// down.sh is sourced from a copy beside a copy of lib.sh, so its ROOT is a temp dir: were main to
// run (as it did on main when sourced), it would find no cluster there and touch nothing.
func TestDownFindsOrphanCNIChainsWithMawk(t *testing.T) {
	tree := t.TempDir()
	for _, f := range []string{"lib.sh", "down.sh"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "hack", "cluster", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(tree, "hack", "cluster", f), string(b), 0o755)
	}
	cmd := exec.Command("bash", "-c", `source "$1" && cni_orphan_chains`, "_", filepath.Join(tree, "hack", "cluster", "down.sh"))
	// mawk first on PATH when the machine has it, as on Debian: the function must not depend on awk.
	bin := filepath.Join(tree, "bin")
	if mawk, err := exec.LookPath("mawk"); err == nil {
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(mawk, filepath.Join(bin, "awk")); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	cmd.Stdin = strings.NewReader(natRules)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cni_orphan_chains: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "CNI-0a1b2c3d4e5f60718293a4b5"; got != want {
		t.Errorf("orphan chains = %q, want only %q (the referenced one, portmap's and others' stay)", got, want)
	}
}

// with_progress says what runs and for how long while a long, silent step runs, and returns its
// status. The step here waits for the test to have seen two progress lines, so no clock decides.
func TestProgressLinesWhileALongStepRuns(t *testing.T) {
	dir := t.TempDir()
	done := filepath.Join(dir, "done")
	cmd := exec.Command("bash", "-c", `source "$1/hack/lib/progress.sh"
step() { while [ ! -e "$2" ]; do sleep 0.1; done; return 7; }
with_progress "building kube-apiserver from source" step _ "$2"; echo "status $?"`, "_", repoRoot(t), done)
	cmd.Env = append(os.Environ(), "PROGRESS_EVERY=1")
	stderr, stdout := startReadingStderr(t, cmd)
	sc := bufio.NewScanner(stderr)
	var lines []string
	for len(lines) < 2 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for _, l := range lines {
		if !strings.Contains(l, "still building kube-apiserver from source (") || !strings.Contains(l, "s)") {
			t.Errorf("progress line %q: want what is built and for how long", l)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("want two progress lines while the step runs, got %q", lines)
	}
	writeFile(t, done, "", 0o644)
	for sc.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(stdout.String()); got != "status 7" {
		t.Errorf("with_progress returned %q, want the step's status 7", got)
	}
}
