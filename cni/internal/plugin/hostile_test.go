package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// The pod directory is the pod's to write (the dataplane container, root, mounts it). These
// tests plant what a hostile pod could and hold every file outside the plugin's own to its
// content, mode and existence: a canary tree beside the socket root, and foreign entries in it.

// canary makes files outside the root that the plugin's names would hit if they escaped it,
// including a device info of this very network (what GC and DEL would remove).
func canary(t *testing.T, dir, network string) string {
	t.Helper()
	c := filepath.Join(dir, "canary")
	mustOK(t, os.MkdirAll(filepath.Join(c, "empty"), 0o700))
	for name, data := range map[string]string{"secret": "secret", "secret.sock": "sock", "secret.json": devinfoOf(network, "c1", "net1"),
		"devinfo": devinfoOf(network, "c9", "net9")} {
		mustOK(t, os.WriteFile(filepath.Join(c, name), []byte(data), 0o600))
	}
	return c
}

func devinfoOf(network, cid, ifname string) string {
	return `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/p/` + ifname +
		`.sock"},"attachment":{"network":"` + network + `","containerID":"` + cid + `","ifname":"` + ifname + `"}}`
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// plant fills the pod directory of n's attachment (and the root) with what a pod or a careless
// admin could leave: traversal names, symlinks at the temp and final paths, foreign files and
// foreign empty directories.
func plant(t *testing.T, n *node, canaryDir string) []string {
	t.Helper()
	pd := n.volume() // the pod's own emptyDir, where its dataplane (root) writes what it likes
	rel, _ := filepath.Rel(pd, filepath.Join(canaryDir, "secret"))
	files := map[string]string{
		"evil.json":    strings.Replace(devinfoOf("fstack", "c1", "x"), `"ifname":"x"`, `"ifname":"`+rel+`"`, 1),
		"net7.json":    devinfoOf("fstack", "../../c", "net7"),
		"net8.json":    devinfoOf("fstack", "c8", "net1"),
		"foreign.txt":  "mine",
		"foreign.sock": "not a socket",
	}
	for name, data := range files {
		mustOK(t, os.WriteFile(filepath.Join(pd, name), []byte(data), 0o600))
	}
	links := map[string]string{".devinfo-net1.json.tmp": "secret", "net2.json": "secret.json", "net2.sock": "secret.sock",
		"sub": "", "net3.json": "empty"}
	for name, target := range links {
		mustOK(t, os.Symlink(filepath.Join(canaryDir, target), filepath.Join(pd, name)))
	}
	mustOK(t, os.MkdirAll(filepath.Join(n.root, "foreign-empty"), 0o755))
	mustOK(t, os.Mkdir(filepath.Join(n.root, "foreign-full"), 0o755)) // unmarked, with what looks like ours
	mustOK(t, os.WriteFile(filepath.Join(n.root, "foreign-full", "net1.json"), []byte(devinfoOf("fstack", "c5", "net1")), 0o600))
	mustOK(t, os.Symlink(canaryDir, filepath.Join(n.root, "u2")))
	return []string{filepath.Join(n.root, "foreign-empty"), filepath.Join(n.root, "foreign-full"), filepath.Join(n.root, "u2"), filepath.Join(pd, "evil.json"),
		filepath.Join(pd, "foreign.txt"), filepath.Join(pd, "net2.json"), filepath.Join(pd, ".devinfo-net1.json.tmp")}
}

func TestHostilePodDirectory(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	c := canary(t, filepath.Dir(n.root), "fstack")
	planted := plant(t, n, c)
	before := nodetest.Tree(t, c)
	plantedBefore := nodetest.Tree(t, planted...)

	if _, _, err := n.add(); err != nil { // through the symlinked temp name of the old writer
		t.Fatalf("ADD: %v", err)
	}
	mustOK(t, n.p.GC(&skel.CmdArgs{StdinData: confJSON(t, n.shared(map[string]any{
		"ovsdbSocket": f.path, "cni.dev/valid-attachments": []any{}}))}))
	for _, npwg := range []string{filepath.Join(c, "secret"), filepath.Join(c, "devinfo")} {
		del := newNode(t, f.path, n.shared(map[string]any{"runtimeConfig": map[string]any{"CNIDeviceInfoFile": npwg}}))
		mustOK(t, del.p.Del(del.args))
	}
	mustOK(t, n.p.Del(n.args))

	nodetest.AssertSameTree(t, before, nodetest.Tree(t, c))
	nodetest.AssertSameTree(t, plantedBefore, nodetest.Tree(t, planted...))
	if _, err := os.Stat(filepath.Join(n.volume(), "net1.json")); err == nil {
		t.Error("the attachment's own device info was not removed")
	}
}

// GC removes a stale attachment's files and with them its marked pod directory, then looks at
// the directory again: one already gone is success.
func TestGCOfAPodDirectoryItEmptied(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	err := n.p.GC(&skel.CmdArgs{StdinData: confJSON(t, n.shared(map[string]any{
		"ovsdbSocket": f.path, "cni.dev/valid-attachments": []any{}}))})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	n.assertNoFiles()
}
