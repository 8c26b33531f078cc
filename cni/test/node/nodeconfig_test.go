package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// Issue 31's reproduction through the binary as a runtime runs it, in a temp root: a network
// config (what a NetworkAttachmentDefinition's author writes) with logFile naming the node's
// ld.so.preload and a kubeletRootDir whose error line would name a library. fstack-cni before
// the node config appended that line to the file; now ADD is refused with code 7 naming the
// field, the file is as it was, and nothing is taken (no port, link, device info or lease).
func TestNetworkConfigCannotWriteTheNodesFiles(t *testing.T) {
	n := newNet(t, "1.1.0")
	p := newPod(1)
	n.kubeletMounts(p)
	preload := filepath.Join(n.dir, "etc", "ld.so.preload")
	if err := os.MkdirAll(filepath.Dir(preload), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(preload, []byte("# the node's own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.extra = map[string]any{"logFile": preload, "kubeletRootDir": "/x /tmp/evil.so"}
	_, err := execPlugin("ADD", n.stdin(), p.cniArgs(), p)
	if err == nil || err.Code != types.ErrInvalidNetworkConfig || !strings.Contains(err.Msg, "from the network config") {
		t.Fatalf("ADD: got %v, want code 7 naming the node path", err)
	}
	t.Logf("ADD refused: %s", err.Msg)
	if got, _ := os.ReadFile(preload); string(got) != "# the node's own\n" {
		t.Fatalf("%s was written: %q", preload, got)
	}
	n.assertNothingLeft()
	// DEL of the same config succeeds (the runtime retries a failed DEL forever) and writes
	// nothing there either: the node's paths are used.
	if _, err := execPlugin("DEL", n.stdin(), p.cniArgs(), p); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if got, _ := os.ReadFile(preload); string(got) != "# the node's own\n" {
		t.Fatalf("%s was written by DEL: %q", preload, got)
	}
}
