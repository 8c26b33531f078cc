package plugin

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// A runtime that gives up on an ADD kills the plugin, not its IPAM child. DEL must not ask IPAM
// to release the attachment's lease before that orphan has taken it, or the lease would stay
// forever; other attachments must not wait for it.
func TestDelWaitsForAnOrphanedIPAMAdd(t *testing.T) {
	root := os.Getenv("FSK_TEST_ROOT")
	if os.Getenv("FSK_TEST_DELEGATING_PLUGIN") == "1" {
		lock, err := lockIPAM(root, portName("c1", "net1"))
		if err != nil {
			os.Exit(3)
		}
		_, _ = delegate(inheritLock(context.Background(), lock), "ADD", "slow-ipam", []byte(`{"cniVersion":"1.1.0"}`))
		return
	}
	dir, root := t.TempDir(), t.TempDir()
	script := "#!/bin/sh\nd=$(dirname \"$0\")\necho $$ > \"$d/pid.tmp\" && mv \"$d/pid.tmp\" \"$d/pid\"\nsleep 2\ntouch \"$d/leased\"\n"
	if err := os.WriteFile(filepath.Join(dir, "slow-ipam"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	plugin := exec.Command(os.Args[0], "-test.run=^TestDelWaitsForAnOrphanedIPAMAdd$")
	plugin.Env = append(os.Environ(), "FSK_TEST_DELEGATING_PLUGIN=1", "CNI_PATH="+dir, "FSK_TEST_ROOT="+root)
	if err := plugin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plugin.Process.Kill(); _ = plugin.Wait() })
	waitForFile(t, filepath.Join(dir, "pid"))
	if err := plugin.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = plugin.Wait()

	other, err := lockIPAM(root, portName("c2", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	if _, err := os.Stat(filepath.Join(dir, "leased")); err == nil {
		t.Fatal("another attachment's lock waited for the orphan")
	}
	lock, err := lockIPAM(root, portName("c1", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := os.Stat(filepath.Join(dir, "leased")); err != nil {
		t.Fatalf("DEL's lock was granted while the orphaned IPAM ADD still ran: %v", err)
	}
}

func waitForFile(t *testing.T, path string) {
	t.Helper()
	for range 1000 { // a bound on setup, not a timed assertion
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}
