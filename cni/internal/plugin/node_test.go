package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
)

// The node's paths are the node config's: a network config (a tenant's
// NetworkAttachmentDefinition) naming others is refused at ADD and CHECK before anything is
// written, the log file included. The reproduction of issue 31's first finding, in a temp root:
// logFile /etc/ld.so.preload with a kubeletRootDir whose error line (quoted into the log) names
// a library. Before, the line was appended to the file; now ADD is refused and the file is as
// it was.
func TestNetworkConfigNamingTheNodesPathsIsRefused(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	etc := filepath.Join(t.TempDir(), "etc")
	mustOK(t, os.MkdirAll(etc, 0o755))
	preload := filepath.Join(etc, "ld.so.preload")
	mustOK(t, os.WriteFile(preload, []byte("# the node's own\n"), 0o644))
	attack := map[string]any{"logFile": preload, "kubeletRootDir": "/x /tmp/evil.so"}
	for _, verb := range []string{"ADD", "CHECK"} {
		stdin := confJSON(t, n.shared(map[string]any{"ovsdbSocket": f.path, "logFile": attack["logFile"],
			"kubeletRootDir": attack["kubeletRootDir"], "ipam": map[string]any{"type": "fake"},
			"prevResult": map[string]any{"cniVersion": "1.1.0"}}))
		args := *n.args
		args.StdinData = stdin
		err := n.p.Funcs().Add(&args)
		if verb == "CHECK" {
			err = n.p.Funcs().Check(&args)
		}
		if codeOf(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), "remove kubeletRootDir from the network config") ||
			!strings.Contains(err.Error(), "remove logFile from the network config") {
			t.Errorf("%s: got %v, want code 7 naming both fields and the fix", verb, err)
		}
		t.Logf("%s refused: %v", verb, err)
	}
	if got, _ := os.ReadFile(preload); string(got) != "# the node's own\n" {
		t.Fatalf("%s was written: %q", preload, got)
	}
	n.assertIPAM(0, 0)
	n.assertNoFiles()
	if len(f.recorded()) != 0 {
		t.Errorf("%d OVSDB transactions, want none", len(f.recorded()))
	}

	// Each node path, alone, with another value is refused naming it; with the node's own
	// value (what older charts rendered) it is accepted.
	other := t.TempDir()
	for _, key := range []string{"ovsdbSocket", "socketRoot", "kubeletRootDir", "deviceInfoDir", "logFile"} {
		over := map[string]any{"ovsdbSocket": f.path, "logFile": n.logFile(), key: filepath.Join(other, key)}
		if _, err := parseAndStart(t, n, confJSON(t, n.shared(over)), "ADD"); codeOf(err) != types.ErrInvalidNetworkConfig ||
			!strings.Contains(err.Error(), key+" ") || !strings.Contains(err.Error(), "remove "+key+" from the network config") {
			t.Errorf("%s %s: got %v, want code 7 naming it", key, over[key], err)
		}
	}
	if _, err := parseAndStart(t, n, n.stdin, "ADD"); err != nil {
		t.Errorf("the node's own values named: %v", err)
	}
}

func parseAndStart(t *testing.T, n *node, stdin []byte, verb string) (*command, error) {
	t.Helper()
	c, err := n.p.start(stdin, verb)
	if c != nil {
		c.closer()
	}
	return c, err
}

// DEL, GC and STATUS never fail on the config's node paths (a runtime retries a failed DEL
// forever): they use the node's, and write nothing where the config says.
func TestDelUsesTheNodesPaths(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	args := *n.args
	args.StdinData = confJSON(t, map[string]any{"ovsdbSocket": f.path, "socketRoot": elsewhere, "kubeletRootDir": elsewhere,
		"deviceInfoDir": elsewhere, "logFile": filepath.Join(elsewhere, "log"), "ipam": map[string]any{"type": "fake"}})
	f.respond = nil
	mustOK(t, n.p.Del(&args))
	n.assertNoFiles()
	if _, err := os.Lstat(elsewhere); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DEL made %s: %v", elsewhere, err)
	}
	log, _ := os.ReadFile(n.logFile())
	if !strings.Contains(string(log), "the node's paths used") {
		t.Errorf("DEL did not log the difference:\n%s", log)
	}
}

// runtimeConfig.CNIDeviceInfoFile is written only as a file directly in the node's device-info
// directory: any other path (another directory, a ".." out of it, a subdirectory, which could be
// a symlink) is refused at ADD, and a symlink at the name is replaced, never written through.
func TestDeviceInfoFileOnlyInTheDeviceInfoDir(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	c := canary(t, t.TempDir(), "fstack")
	before := readTree(t, c)
	mustOK(t, os.MkdirAll(n.devDir, 0o755))
	mustOK(t, os.Symlink(c, filepath.Join(n.devDir, "sub")))
	for _, file := range []string{filepath.Join(c, "secret"), n.devDir + "/../canary-secret", filepath.Join(n.devDir, "sub", "secret"), "rel/x.json"} {
		conf := n.shared(map[string]any{"ovsdbSocket": f.path, "logFile": n.logFile(), "runtimeConfig": map[string]any{"CNIDeviceInfoFile": file}})
		_, err := parseAndStart(t, n, confJSON(t, conf), "ADD")
		if codeOf(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), "CNIDeviceInfoFile") {
			t.Errorf("CNIDeviceInfoFile %s: got %v, want code 7 naming it", file, err)
		}
	}
	// Directly in the directory, with a symlink at the name: the link is replaced.
	mustOK(t, os.Symlink(filepath.Join(c, "secret"), filepath.Join(n.devDir, "multus.json")))
	n.stdin = confJSON(t, n.shared(map[string]any{"ovsdbSocket": f.path, "logFile": n.logFile(), "ipam": map[string]any{"type": "fake"},
		"runtimeConfig": map[string]any{"CNIDeviceInfoFile": filepath.Join(n.devDir, "multus.json")}}))
	if _, _, err := n.add(); err != nil {
		t.Fatalf("ADD with a CNIDeviceInfoFile in the directory: %v", err)
	}
	if st, err := os.Lstat(filepath.Join(n.devDir, "multus.json")); err != nil || !st.Mode().IsRegular() {
		t.Errorf("the device info is not a regular file in its place: %v", err)
	}
	assertSameContent(t, before, readTree(t, c))
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	mustOK(t, err)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}

func assertSameContent(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed: %q, was %q", k, after[k], v)
		}
	}
	if len(after) != len(before) {
		t.Errorf("entries %d, were %d", len(after), len(before))
	}
}

// Without a node config the plugin can trust (missing, not the required owner's, writable by
// others, not a regular file, in a directory others may write), ADD serves nothing and says
// what to do, before anything is taken. (DEL then works with the defaults, this machine's real
// paths, so it is not run here.)
func TestUntrustedNodeConfigServesNothing(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(n *node)
		want  string
	}{
		{"missing", func(n *node) { mustOK(t, os.Remove(n.p.NodeConfig)) }, "installer writes"},
		{"another owner", func(n *node) { n.p.NodeConfigOwner = os.Getuid() + 1 }, "is owned by uid"},
		{"group-writable", func(n *node) { mustOK(t, os.Chmod(n.p.NodeConfig, 0o664)) }, "writable by group or others"},
		{"world-writable directory", func(n *node) { mustOK(t, os.Chmod(filepath.Dir(n.p.NodeConfig), 0o777)) }, "writable by group or others"},
		{"a symlink", func(n *node) {
			real := n.p.NodeConfig + ".real"
			mustOK(t, os.Rename(n.p.NodeConfig, real))
			mustOK(t, os.Symlink(real, n.p.NodeConfig))
		}, "symbolic link"},
		{"a directory", func(n *node) {
			mustOK(t, os.Remove(n.p.NodeConfig))
			mustOK(t, os.Mkdir(n.p.NodeConfig, 0o755))
		}, "not a regular file"},
		{"unknown member", func(n *node) { mustOK(t, os.WriteFile(n.p.NodeConfig, []byte(`{"logPath":"/x"}`), 0o644)) }, "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeOVSDB(t, nil)
			n := newNode(t, f.path, nil)
			c.spoil(n)
			_, _, err := n.add()
			if codeOf(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), "serves no pod on this node") ||
				!strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want code 7 saying %q", err, c.want)
			}
			n.assertIPAM(0, 0)
			n.assertNoFiles()
			if len(f.recorded()) != 0 {
				t.Errorf("OVSDB transactions %v, want none", f.recorded())
			}
		})
	}
}

// fstack-cni serves only pods of the namespaces its node config lists (the chart renders the
// opted-in ones): a pod elsewhere that declares an emptyDir fstack-vhost (in a chained conflist
// any pod of the node could) is refused before anything is taken; its DEL succeeds.
func TestOnlyOptedInNamespacesAreServed(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	for _, args := range []string{"K8S_POD_NAMESPACE=other;K8S_POD_NAME=p;K8S_POD_UID=u1", "K8S_POD_UID=u1"} {
		n := newNode(t, f.path, nil)
		n.args.Args = args
		_, _, err := n.add()
		if codeOf(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), "is not one fstack-cni serves") ||
			!strings.Contains(err.Error(), "cni.nodeConfig.namespaces") {
			t.Fatalf("%s: got %v, want code 7 naming the namespace and the chart value", args, err)
		}
		n.assertIPAM(0, 0)
		n.assertNoFiles()
		mustOK(t, n.p.Del(n.args))
		mustOK(t, n.p.Del(n.args))
	}
	if len(f.recorded()) != 4 { // the DELs' only
		t.Errorf("%d OVSDB transactions, want the 4 DELs'", len(f.recorded()))
	}
	// The chain's pass-through of pods that are no F-Stack pods is unchanged.
	n := newNode(t, f.path, map[string]any{"skipUnprepared": true, "prevResult": map[string]any{"cniVersion": "1.1.0"}})
	n.args.Args = "K8S_POD_NAMESPACE=other;K8S_POD_UID=u9"
	c, err := n.p.start(n.stdin, "ADD")
	mustOK(t, err)
	defer c.closer()
	a, err := c.addAttachment(n.args)
	mustOK(t, err)
	if !c.skipped(a) {
		t.Error("a pod without the emptyDir of a namespace not served is not passed through")
	}
}

// nodeconf.Path is what a real plugin reads; a test never does.
func TestNewReadsTheNodesConfig(t *testing.T) {
	if p := New(); p.NodeConfig != nodeconf.Path || p.NodeConfigOwner != 0 {
		t.Fatalf("New reads %s owned by %d, want %s owned by root", p.NodeConfig, p.NodeConfigOwner, nodeconf.Path)
	}
}
