package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// portRows is the reply to DEL's transaction: the Interface (with its socket), and how many
// bridges the unlink by UUID changed (0 for a port an older fstack-cni made).
func portRows(socket string, unlinked int) fakeReply {
	iface := map[string]any{"name": "fsk", "type": portType,
		"options":      []any{"map", []any{[]any{optionSocket, socket}}},
		"external_ids": []any{"map", []any{[]any{podcontract.OVSIDContainerID, "c1"}, []any{podcontract.OVSIDIfName, "net1"}}}}
	return fakeReply{results: []any{map[string]any{"rows": []any{iface}}, map[string]any{"count": unlinked}}}
}

// DEL removes the files where ADD put them (the port's socket says where), even when the
// config's socketRoot changed since, in one round trip that also unlinks the port by the UUID
// ADD gave it.
func TestDelFollowsThePortToTheFilesADDMade(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	if inserted := f.txn(1)[slices.Index(insertTxn, "insert Port")]["uuid"]; inserted != portUUID(a.PortName) {
		t.Fatalf("ADD inserted the Port with UUID %v, want %s", inserted, portUUID(a.PortName))
	}
	f.respond = func(int, []map[string]any) fakeReply { return portRows(a.Socket, 1) }
	moved := newNode(t, f.path, map[string]any{"deviceInfoDir": n.devDir, "kubeletRootDir": n.kubelet})
	moved.ipam = n.ipam
	moved.p.IPAM = n.ipam
	if err := moved.p.Del(moved.args); err != nil {
		t.Fatal(err)
	}
	assertTxns(t, f, insertTxn, []string{"select Interface", "mutate Bridge"})
	if m := fmt.Sprint(f.txn(2)[1]["mutations"]); !strings.Contains(m, portUUID(a.PortName)) {
		t.Errorf("unlinked %s, want %s", m, portUUID(a.PortName))
	}
	n.assertNoFiles()
	n.assertIPAM(1, 1)
}

// A port an older fstack-cni made has a UUID OVSDB chose: DEL finds it by name and unlinks that.
func TestDelRemovesAPortWithAnotherUUID(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	f.respond = func(n int, _ []map[string]any) fakeReply {
		switch n {
		case 2:
			return portRows(a.Socket, 0)
		case 3:
			return fakeReply{results: []any{map[string]any{"rows": []any{map[string]any{"_uuid": []any{"uuid", "port-1"}}}}}}
		}
		return fakeReply{}
	}
	if err := n.p.Del(n.args); err != nil {
		t.Fatal(err)
	}
	assertTxns(t, f, insertTxn, []string{"select Interface", "mutate Bridge"}, []string{"select Port"}, []string{"mutate Bridge"})
	if m := fmt.Sprint(f.txn(4)[0]["mutations"]); !strings.Contains(m, "port-1") {
		t.Errorf("unlinked %s, want port-1", m)
	}
	n.assertNoFiles()
}

// DEL of something that was never added (or already deleted) succeeds and unlinks nothing.
func TestDelOfNothingSucceedsInOneRoundTrip(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	for range 2 {
		if err := n.p.Del(n.args); err != nil {
			t.Fatal(err)
		}
	}
	assertTxns(t, f, []string{"select Interface", "mutate Bridge"}, []string{"select Interface", "mutate Bridge"})
	n.assertIPAM(0, 2)
}

// With OVSDB down the port may still exist, so DEL asks to be retried; the files and the lease
// go anyway.
func TestDelWithOVSDBDownRemovesTheRestAndAsksForARetry(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	down := newNode(t, filepath.Join(t.TempDir(), "gone.sock"), n.shared(nil))
	down.p.IPAM = n.ipam
	err := down.p.Del(down.args)
	if codeOf(err) != types.ErrTryAgainLater {
		t.Fatalf("got %v, want code 11", err)
	}
	n.assertNoFiles()
	n.assertIPAM(1, 1)
}

// Another sandbox of the same pod owns the pod directory's device info: an old DEL leaves it.
func TestDelLeavesAnotherContainersFiles(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	old := newNode(t, f.path, n.shared(nil))
	old.args.ContainerID = "c0"
	if err := old.p.Del(old.args); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.devInfoInPodDir()); err != nil {
		t.Fatalf("DEL of c0 removed c1's device info: %v", err)
	}
}

// A device-info temp file a killed ADD left in the pod directory does not keep the directory.
func TestDelRemovesStaleTempsWithThePodDirectory(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	for _, tmp := range []string{".devinfo-net9.json.tmp", fsutil.TempPrefix("net9.json") + "x1"} {
		if err := os.WriteFile(filepath.Join(a.PodDir, tmp), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.p.Del(n.args); err != nil {
		t.Fatal(err)
	}
	n.assertNoFiles()
}

// A temp file an ADD killed inside its write of the NPWG device info left in the node's
// device-info directory goes with the attachment's DEL (the node tier's fault run saw one
// stay): its name starts with the writer's prefix for this attachment's file.
func TestDelRemovesTheDeviceInfoDirsTempOfItsFile(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(n.devDir, fsutil.TempPrefix(filepath.Base(a.DevInfoFile))+"123")
	other := filepath.Join(n.devDir, fsutil.TempPrefix("another-pods-file")+"123")
	for _, p := range []string{tmp, other} {
		if err := os.WriteFile(p, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.p.Del(n.args); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DEL left the killed ADD's temp %s (err %v)", tmp, err)
	}
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("DEL removed another attachment's temp %s: %v", other, err)
	}
}
