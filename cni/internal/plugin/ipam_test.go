package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// fakeIPAMPlugin installs an executable IPAM plugin that records its command and stdin and
// answers ADD with a result, DEL with a CNI error and CHECK with a crash.
func fakeIPAMPlugin(t *testing.T, addResult string) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
d=$(dirname "$0")
echo "$CNI_COMMAND" >> "$d/calls"
cat > "$d/stdin"
case "$CNI_COMMAND" in
ADD) echo '` + addResult + `' ;;
DEL) echo '{"cniVersion":"1.1.0","code":11,"msg":"pool busy"}'; exit 1 ;;
CHECK) echo "segfault" >&2; exit 139 ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "fake-ipam"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CNI_PATH", filepath.Join(dir, "missing")+string(os.PathListSeparator)+dir)
	t.Setenv("CNI_COMMAND", "VERSION") // the plugin's own command must not leak to the delegate
	return dir
}

func TestDelegateRunsThePluginWithItsVerbAndStdin(t *testing.T) {
	dir := fakeIPAMPlugin(t, `{"cniVersion":"1.1.0","ips":[{"address":"10.1.0.5/24","gateway":"10.1.0.1"}]}`)
	stdin := []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"fake-ipam"}}`)
	r, err := execIPAM{}.Add(context.Background(), "fake-ipam", stdin)
	if err != nil {
		t.Fatal(err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil || len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.1.0.5/24" {
		t.Fatalf("result %+v %v", res, err)
	}
	err = execIPAM{}.Del(context.Background(), "fake-ipam", stdin)
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater || te.Msg != "pool busy" {
		t.Fatalf("DEL error %#v, want the plugin's own code 11", err)
	}
	err = execIPAM{}.Check(context.Background(), "fake-ipam", stdin)
	if err == nil || !strings.Contains(err.Error(), "segfault") {
		t.Fatalf("CHECK error %v, want the plugin's stderr", err)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	got, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	if string(calls) != "ADD\nDEL\nCHECK\n" || string(got) != string(stdin) {
		t.Fatalf("calls %q, stdin %q", calls, got)
	}
}

// The spec: a result without cniVersion is in the config's version.
func TestDelegateResultWithoutVersionTakesTheConfigs(t *testing.T) {
	fakeIPAMPlugin(t, `{"ips":[{"address":"10.1.0.5/24"}]}`)
	r, err := execIPAM{}.Add(context.Background(), "fake-ipam", []byte(`{"cniVersion":"0.4.0","name":"n"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version() != "0.4.0" {
		t.Fatalf("result version %s, want the config's 0.4.0", r.Version())
	}
}

func TestDelegateFindsOnlyPluginsInCNIPath(t *testing.T) {
	fakeIPAMPlugin(t, `{}`)
	for _, name := range []string{"absent", "../fake-ipam", ""} {
		if _, err := (execIPAM{}).Add(context.Background(), name, []byte(`{"cniVersion":"1.1.0"}`)); err == nil {
			t.Errorf("plugin %q was run", name)
		}
	}
}

// A runtime that gives up on an ADD kills the plugin, not its children. The IPAM plugin it was
// running must die with it: left alone it could take a lease after the runtime's DEL released
// the attachment's, and nothing would ever give that lease back.
func TestDelegatedIPAMDiesWithThePlugin(t *testing.T) {
	if os.Getenv("FSK_TEST_DELEGATING_PLUGIN") == "1" {
		_, _ = delegate(context.Background(), "ADD", "slow-ipam", []byte(`{"cniVersion":"1.1.0"}`))
		return
	}
	dir := t.TempDir()
	script := "#!/bin/sh\necho $$ > \"$(dirname \"$0\")/pid.tmp\"\nmv \"$(dirname \"$0\")/pid.tmp\" \"$(dirname \"$0\")/pid\"\nexec sleep 60\n"
	if err := os.WriteFile(filepath.Join(dir, "slow-ipam"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	plugin := exec.Command(os.Args[0], "-test.run=^TestDelegatedIPAMDiesWithThePlugin$")
	plugin.Env = append(os.Environ(), "FSK_TEST_DELEGATING_PLUGIN=1", "CNI_PATH="+dir)
	if err := plugin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plugin.Process.Kill(); _ = plugin.Wait() })
	pid := waitForPid(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := plugin.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = plugin.Wait()
	for range 500 { // a bound on the kernel's signal delivery, not a timed assertion
		if !running(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the IPAM plugin (pid %d) outlived the killed plugin", pid)
}

func waitForPid(t *testing.T, path string) int {
	t.Helper()
	for range 1000 {
		if b, err := os.ReadFile(path); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the IPAM plugin never started")
	return 0
}

// running is false for a process that is gone or a zombie (dead, not yet reaped by its new
// parent).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
