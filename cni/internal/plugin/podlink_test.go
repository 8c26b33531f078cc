package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The pod's socket directory is its emptyDir (the kubelet's); the socket root holds only a link
// to it. newNode's kubelet root stands in for the kubelet, which makes the emptyDir before the
// sandbox.

// ADD links <socketRoot>/<uid> to the emptyDir the kubelet root and the pod's UID name, and
// nothing else: not the pod's name, not podSocketDir, not an earlier link (the namespace is one
// the node serves, so a name: nodeconf refuses a path there). The device info is a regular file
// in the emptyDir itself.
func TestAddLinksThePodsEmptyDir(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, map[string]any{"podSocketDir": "/elsewhere"})
	n.args.Args = "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=../../etc/tmp;K8S_POD_UID=u1"
	other := filepath.Join(t.TempDir(), "old-kubelet", "pods", "u1", "volumes", "kubernetes.io~empty-dir", "fstack-vhost")
	mustOK(t, os.MkdirAll(n.root, 0o755))
	mustOK(t, os.Symlink(other, filepath.Join(n.root, "u1"))) // made under an earlier kubeletRootDir
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(n.kubelet, "pods/u1/volumes/kubernetes.io~empty-dir/fstack-vhost")
	if got, err := os.Readlink(filepath.Join(n.root, "u1")); err != nil || got != want {
		t.Fatalf("link %s -> %q (%v), want -> %s", filepath.Join(n.root, "u1"), got, err, want)
	}
	if a.Socket != filepath.Join(n.root, "u1", "net1.sock") {
		t.Errorf("OVS's socket %s, want it through the link", a.Socket)
	}
	st, err := os.Lstat(filepath.Join(want, "net1.json"))
	if err != nil || !st.Mode().IsRegular() {
		t.Errorf("device info in the emptyDir: %v %v", st, err)
	}
}

// A pod the injector did not prepare has no emptyDir: ADD says what to do and takes nothing (no
// lease, no OVSDB transaction, no link, nothing made in the kubelet's dir).
func TestAddWithoutTheEmptyDirFailsAndLeavesNothing(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	mustOK(t, os.RemoveAll(filepath.Join(n.kubelet, "pods")))
	_, _, err := n.add()
	if codeOf(err) != types.ErrIOFailure {
		t.Fatalf("got %v, want code %d", err, types.ErrIOFailure)
	}
	for _, want := range []string{"no emptyDir volume fstack-vhost", n.volume(), "injector", "kubeletRootDir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	assertTxns(t, f)
	n.assertIPAM(0, 0)
	n.assertNoFiles()
	if _, err := os.Lstat(filepath.Join(n.kubelet, "pods")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ADD made something in the kubelet's dir: %v", err)
	}
}

// A link or file at the pod's name that the plugin did not make is refused and left alone.
func TestAddLeavesAForeignEntryAtThePodsName(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	mustOK(t, os.MkdirAll(n.root, 0o755))
	mustOK(t, os.Symlink("/etc", filepath.Join(n.root, "u1")))
	_, _, err := n.add()
	if err == nil || !strings.Contains(err.Error(), "not a link fstack-cni made") {
		t.Fatalf("got %v, want a refusal of the foreign link", err)
	}
	if got, _ := os.Readlink(filepath.Join(n.root, "u1")); got != "/etc" {
		t.Errorf("the foreign link now leads to %q", got)
	}
	n.assertIPAM(1, 1)
}

// DEL removes the link and the attachment's files from the emptyDir, and again succeeds with
// nothing to do; the emptyDir itself is the kubelet's and stays. A pod directory of the hostPath
// layout (a pod created before the upgrade) is removed by its DEL too.
func TestDelRemovesTheLinkAndOldPodDirectories(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Readlink(filepath.Join(n.root, "u1")); err != nil {
		t.Fatalf("ADD made no link: %v", err)
	}
	old := filepath.Join(n.root, "u0")
	mustOK(t, os.MkdirAll(old, 0o755))
	mustOK(t, os.WriteFile(filepath.Join(old, PodDirMarker), nil, 0o644))
	mustOK(t, os.WriteFile(filepath.Join(old, "net1.json"), []byte(devinfoOf("fstack", "c0", "net1")), 0o644))
	for range 2 {
		mustOK(t, n.p.Del(n.args))
	}
	n.assertNoFiles()
	if _, err := os.Stat(n.volume()); err != nil {
		t.Errorf("DEL removed the kubelet's emptyDir: %v", err)
	}
	f.respond = func(int, []map[string]any) fakeReply { return portRows(filepath.Join(old, "net1.sock"), 1) }
	oldDel := newNode(t, f.path, n.shared(nil))
	oldDel.args.ContainerID, oldDel.args.Args = "c0", "K8S_POD_UID=u0"
	mustOK(t, oldDel.p.Del(oldDel.args))
	if _, err := os.Lstat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old layout's pod directory is left: %v", err)
	}
}

// An earlier sandbox's DEL, after the new sandbox's ADD, leaves the link the new one needs.
func TestDelKeepsTheLinkOfAnotherSandbox(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	old := newNode(t, f.path, n.shared(nil))
	old.args.ContainerID = "c0"
	mustOK(t, old.p.Del(old.args))
	if _, err := os.Stat(filepath.Join(n.root, "u1", "net1.json")); err != nil {
		t.Fatalf("DEL of c0 took c1's link or device info: %v", err)
	}
	if _, err := os.Readlink(filepath.Join(n.root, "u1")); err != nil {
		t.Fatalf("no link: %v", err)
	}
}

// GC removes the link of a pod the kubelet has removed, whatever the runtime still lists (the
// emptyDir and with it what the pod planted there are gone), the stale attachments' files and
// links of live pods, and marked pod directories of the old layout; a link it did not make stays.
func TestGCRemovesLinksOfPodsThatAreGone(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	mustOK(t, os.WriteFile(filepath.Join(n.volume(), "planted"), make([]byte, 1<<20), 0o644))
	mustOK(t, os.RemoveAll(filepath.Join(n.kubelet, "pods", "u1"))) // as the kubelet does with the pod
	live := newNode(t, f.path, n.shared(nil))
	live.args.ContainerID, live.args.Args = "c2", "K8S_POD_NAMESPACE=ns;K8S_POD_UID=u2"
	mustOK(t, os.MkdirAll(filepath.Join(n.kubelet, "pods/u2/volumes/kubernetes.io~empty-dir/fstack-vhost"), 0o755))
	if _, _, err := live.add(); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(n.root, "u0")
	mustOK(t, os.MkdirAll(old, 0o755))
	mustOK(t, os.WriteFile(filepath.Join(old, PodDirMarker), nil, 0o644))
	mustOK(t, os.Symlink("/etc", filepath.Join(n.root, "u3")))

	gc := func(valid ...any) {
		t.Helper()
		mustOK(t, n.p.GC(&skel.CmdArgs{StdinData: confJSON(t, n.shared(map[string]any{
			"ovsdbSocket": f.path, "cni.dev/valid-attachments": valid}))}))
	}
	gc(map[string]any{"containerID": "c1", "ifname": "net1"}, map[string]any{"containerID": "c2", "ifname": "net1"})
	if _, err := os.Lstat(filepath.Join(n.root, "u1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link of a removed pod is left: %v", err)
	}
	if _, err := os.Lstat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old layout's empty pod directory is left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.root, "u2", "net1.json")); err != nil {
		t.Errorf("GC took a valid attachment's link or files: %v", err)
	}
	gc()
	if _, err := os.Lstat(filepath.Join(n.root, "u2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link of a stale attachment is left: %v", err)
	}
	if got, _ := os.Readlink(filepath.Join(n.root, "u3")); got != "/etc" {
		t.Errorf("GC touched a link it did not make: %q", got)
	}
}

// In a chain that runs for every pod of the node (skipUnprepared), a pod without the emptyDir is
// not an F-Stack pod: its ADD passes the previous result through and takes nothing; without
// skipUnprepared the same ADD fails.
func TestSkipUnpreparedPassesAChainedPodThrough(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	prev := map[string]any{"cniVersion": "1.1.0", "interfaces": []any{map[string]any{"name": "eth0"}},
		"ips": []any{map[string]any{"address": "10.1.0.5/24", "interface": 0}}}
	n := newNode(t, f.path, map[string]any{"skipUnprepared": true, "prevResult": prev})
	mustOK(t, os.RemoveAll(filepath.Join(n.kubelet, "pods")))
	n.args.StdinData = n.stdin
	mustOK(t, n.p.Add(n.args))
	assertTxns(t, f)
	n.assertIPAM(0, 0)
	n.assertNoFiles()
	strict := newNode(t, f.path, n.shared(map[string]any{"prevResult": prev}))
	mustOK(t, os.RemoveAll(filepath.Join(n.kubelet, "pods")))
	if err := strict.p.Add(strict.args); codeOf(err) != types.ErrIOFailure {
		t.Fatalf("without skipUnprepared: %v, want code %d", err, types.ErrIOFailure)
	}
}

// Its DEL takes nothing either, even with OVSDB unreachable (a node without OVS, which the chain
// reaches too): the pod can stop. An F-Stack pod's DEL on that node still asks to be retried,
// since its port may exist.
func TestSkipUnpreparedDelsAChainedPodWithoutOVS(t *testing.T) {
	prev := map[string]any{"cniVersion": "1.1.0", "interfaces": []any{map[string]any{"name": "eth0"}}}
	n := newNode(t, filepath.Join(t.TempDir(), "no-ovs.sock"), map[string]any{"skipUnprepared": true, "prevResult": prev})
	mustOK(t, os.RemoveAll(filepath.Join(n.kubelet, "pods")))
	n.args.StdinData = n.stdin
	mustOK(t, n.p.Del(n.args))
	n.assertIPAM(0, 0)

	injected := newNode(t, filepath.Join(t.TempDir(), "no-ovs.sock"), map[string]any{"skipUnprepared": true, "prevResult": prev})
	if err := injected.p.Del(injected.args); codeOf(err) != types.ErrTryAgainLater {
		t.Fatalf("DEL of a pod with the emptyDir, OVSDB unreachable: %v, want code %d", err, types.ErrTryAgainLater)
	}
}

// An ADD killed right after it made the pod's link leaves the link alone (no device info, no
// port): its DEL removes it, and if the DEL never comes, GC does once the kubelet removed the
// pod. (The hostPath layout leaked a directory an ADD killed before its marker left: issue 23.)
func TestAKilledAddsLinkIsRemovedByDelOrGC(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	link := filepath.Join(n.root, "u1")
	mustOK(t, os.MkdirAll(n.root, 0o755))
	mustOK(t, os.Symlink(n.volume(), link))
	mustOK(t, n.p.Del(n.args))
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DEL left the link of a killed ADD: %v", err)
	}

	mustOK(t, os.Symlink(n.volume(), link))
	mustOK(t, os.RemoveAll(filepath.Join(n.kubelet, "pods", "u1")))
	mustOK(t, n.p.GC(&skel.CmdArgs{StdinData: confJSON(t, n.shared(map[string]any{
		"ovsdbSocket": f.path, "cni.dev/valid-attachments": []any{}}))}))
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("GC left the link of a killed ADD whose pod is gone: %v", err)
	}
}

// DEL decides whether to keep the pod's link under the node-wide lock, which every ADD and DEL
// of the node waits for, in a directory the pod fills as it likes: 5000 planted *.json files
// (of names ADD could write, and others) must not be read, only a bounded few. The link of such
// a pod stays until the kubelet removes its emptyDir; GC then removes it.
func TestDelReadsABoundedFewOfWhatThePodPlanted(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		name := fmt.Sprintf("p%d.json", i)
		if i%2 == 1 {
			name = fmt.Sprintf("not-an-ifname-%d.json", i)
		}
		mustOK(t, os.WriteFile(filepath.Join(n.volume(), name), []byte(`{"type":"planted"}`), 0o644))
	}
	var reads atomic.Int64
	defer func(orig func(*fsutil.Dir, string) (*podcontract.DevInfo, error)) { readDevInfoIn = orig }(readDevInfoIn)
	readDevInfoIn = func(d *fsutil.Dir, name string) (*podcontract.DevInfo, error) {
		reads.Add(1)
		return podcontract.ReadDevInfoIn(d, name)
	}
	mustOK(t, n.p.Del(n.args))
	if r := reads.Load(); r > maxHeldReads {
		t.Fatalf("DEL read %d of the pod's planted files under the root lock, want at most %d", r, maxHeldReads)
	}
	if _, err := os.Lstat(filepath.Join(n.volume(), "net1.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the attachment's own device info is left: %v", err)
	}
	mustOK(t, os.RemoveAll(filepath.Join(n.kubelet, "pods", "u1"))) // as the kubelet does with the pod
	mustOK(t, n.p.GC(&skel.CmdArgs{StdinData: confJSON(t, n.shared(map[string]any{
		"ovsdbSocket": f.path, "cni.dev/valid-attachments": []any{}}))}))
	n.assertNoFiles()
}
