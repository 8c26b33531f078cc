package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// insertTxn is ADD's port transaction; its last waits refuse the MAC and the address (the fake
// IPAM's one) when another pod's port holds them.
var insertTxn = []string{"wait Bridge", "wait Interface", "wait Interface", "wait Interface", "insert Interface", "insert Port", "mutate Bridge", "select Open_vSwitch", "wait Interface", "wait Interface"}

func assertTxns(t *testing.T, f *fakeOVSDB, want ...[]string) {
	t.Helper()
	if got := f.recorded(); (len(got) != 0 || len(want) != 0) && !reflect.DeepEqual(got, want) {
		t.Fatalf("transactions\n got %v\nwant %v", got, want)
	}
}

// commitRefused is the reply of a transaction the server rolled back at commit.
func commitRefused(ops []map[string]any, err string) fakeReply {
	return fakeReply{results: append(defaultResults(ops), map[string]any{"error": err, "details": "test"})}
}

func TestAddMakesThePortInOneTransaction(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	res, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	assertTxns(t, f, insertTxn)
	iface := f.txn(1)[slices.Index(insertTxn, "insert Interface")]["row"].(map[string]any)
	ids := fmt.Sprint(iface["external_ids"])
	for _, want := range []string{"kube-fstack.io/owner fstack-cni", "kube-fstack.io/container-id c1", "kube-fstack.io/ifname net1",
		"kube-fstack.io/pod-uid u1", "kube-fstack.io/pod-name web-0", "kube-fstack.io/pod-namespace ns", "kube-fstack.io/network fstack"} {
		if !strings.Contains(ids, want) {
			t.Errorf("external_ids %s lack %q", ids, want)
		}
	}
	if iface["type"] != portType || !strings.Contains(fmt.Sprint(iface["options"]), a.Socket) || iface["name"] != a.PortName {
		t.Errorf("interface row %v", iface)
	}
	if len(res.Interfaces) != 1 || res.Interfaces[0].SocketPath != a.Socket || len(res.IPs) != 1 || *res.IPs[0].Interface != 0 {
		t.Errorf("result %+v", res)
	}
	for _, p := range []string{a.devInfoInPodDir(), a.DevInfoFile} {
		info, err := podcontract.ReadDevInfo(p)
		if err != nil || info.IPs[0] != "10.9.0.5/24" || info.Gateway != "10.9.0.1" || info.VhostUser.Path != a.PodSocket {
			t.Errorf("%s: %+v %v", p, info, err)
		}
	}
	n.assertIPAM(1, 0)
}

// A port left by an earlier ADD of the same attachment makes the insert fail: on the Port's UUID
// (the server says so at the insert) or, for a port an older fstack-cni made, on the unique name
// (at the commit). It is removed in a transaction of its own (OVS would keep its old socket
// otherwise), then the insert is sent again.
func TestAddReplacesAStalePortInItsOwnTransaction(t *testing.T) {
	refusals := map[string]func(ops []map[string]any) fakeReply{
		"duplicate name": func(ops []map[string]any) fakeReply { return commitRefused(ops, "constraint violation") },
		"duplicate uuid": func(ops []map[string]any) fakeReply {
			res := defaultResults(ops)
			i := slices.Index(insertTxn, "insert Port")
			res[i] = map[string]any{"error": "duplicate uuid", "details": "test"}
			return fakeReply{results: res[:i+1]}
		},
	}
	for name, refuse := range refusals {
		t.Run(name, func(t *testing.T) {
			f := newFakeOVSDB(t, func(n int, ops []map[string]any) fakeReply {
				switch n {
				case 1:
					return refuse(ops)
				case 2:
					return fakeReply{results: []any{map[string]any{"rows": []any{map[string]any{"_uuid": []any{"uuid", "stale-1"}}}}}}
				}
				return fakeReply{}
			})
			n := newNode(t, f.path, nil)
			if _, _, err := n.add(); err != nil {
				t.Fatal(err)
			}
			assertTxns(t, f, insertTxn, []string{"select Port"}, []string{"mutate Bridge"}, insertTxn)
			if m := fmt.Sprint(f.txn(3)[0]["mutations"]); !strings.Contains(m, "delete") || !strings.Contains(m, "stale-1") {
				t.Errorf("the stale port was not unlinked: %s", m)
			}
			n.assertIPAM(1, 0)
		})
	}
}

// A wrong bridge is found by the insert's wait; a select then names the mistake, and the
// rollback gives back the lease and removes the files (and looks for a port to remove).
func TestAddRollsBackWhenTheBridgeIsWrong(t *testing.T) {
	cases := []struct {
		name string
		rows []any
		want string
	}{
		{"not netdev", []any{map[string]any{"datapath_type": "system"}}, `has datapath_type "system"`},
		{"missing", []any{}, "bridge does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeOVSDB(t, func(n int, ops []map[string]any) fakeReply {
				switch n {
				case 1:
					res := defaultResults(ops)
					res[0] = map[string]any{"error": "timed out", "details": "wait"}
					return fakeReply{results: res[:1]}
				case 2:
					return fakeReply{results: []any{map[string]any{"rows": tc.rows}}}
				}
				return fakeReply{}
			})
			n := newNode(t, f.path, nil)
			_, _, err := n.add()
			if codeOf(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (code %d), want code 7 and %q", err, codeOf(err), tc.want)
			}
			assertTxns(t, f, insertTxn, []string{"select Bridge"}, []string{"select Port"})
			n.assertIPAM(1, 1)
			n.assertNoFiles()
		})
	}
}

// OVSDB vanishes at the insert, which it may have committed: ADD says "try again later", and
// the rollback reconnects and removes the port as well as the lease and the files.
func TestAddRollsBackWhenOVSDBVanishesAtTheInsert(t *testing.T) {
	f := newFakeOVSDB(t, func(n int, ops []map[string]any) fakeReply {
		switch n {
		case 1:
			return fakeReply{hangUp: true}
		case 2:
			return fakeReply{results: []any{map[string]any{"rows": []any{map[string]any{"_uuid": []any{"uuid", "committed-1"}}}}}}
		}
		return fakeReply{}
	})
	n := newNode(t, f.path, nil)
	_, _, err := n.add()
	if codeOf(err) != types.ErrTryAgainLater {
		t.Fatalf("got %v, want code 11", err)
	}
	assertTxns(t, f, insertTxn, []string{"select Port"}, []string{"mutate Bridge"})
	if m := fmt.Sprint(f.txn(3)[0]["mutations"]); !strings.Contains(m, "committed-1") {
		t.Errorf("the committed port was not unlinked: %s", m)
	}
	if f.connections() != 2 {
		t.Errorf("%d connections, want a second one for the rollback", f.connections())
	}
	n.assertIPAM(1, 1)
	n.assertNoFiles()
}

// With ovsdb-server down, ADD fails before it takes a lease or writes a file.
func TestAddTakesNothingWhenOVSDBIsDown(t *testing.T) {
	n := newNode(t, filepath.Join(t.TempDir(), "no-ovs.sock"), nil)
	_, _, err := n.add()
	if codeOf(err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), "is ovsdb-server running?") {
		t.Fatalf("got %v, want code 11", err)
	}
	n.assertIPAM(0, 0)
	n.assertNoFiles()
}

// An IPAM plugin that fails half-way may still hold a lease: its DEL runs anyway, and nothing
// reaches OVSDB.
func TestAddRollsBackWhenIPAMFails(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, nil)
	n.ipam.addErr = types.NewError(types.ErrTryAgainLater, "pool busy", "")
	_, _, err := n.add()
	if codeOf(err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), "pool busy") {
		t.Fatalf("got %v, want the IPAM plugin's own code and message", err)
	}
	assertTxns(t, f)
	n.assertIPAM(1, 1)
	n.assertNoFiles()
}

// A file that cannot be written undoes the lease and the port, which comes first (the device
// info carries what its transaction read of the switch).
func TestAddRollsBackWhenTheFilesCannotBeWritten(t *testing.T) {
	f := newFakeOVSDB(t, func(n int, ops []map[string]any) fakeReply {
		if n == 2 {
			return fakeReply{results: []any{map[string]any{"rows": []any{map[string]any{"_uuid": []any{"uuid", "made-1"}}}}}}
		}
		return fakeReply{}
	})
	n := newNode(t, f.path, nil)
	if err := os.MkdirAll(filepath.Dir(n.devDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.devDir, nil, 0o644); err != nil { // a file where the directory goes
		t.Fatal(err)
	}
	_, _, err := n.add()
	if codeOf(err) != types.ErrIOFailure {
		t.Fatalf("got %v, want code 5", err)
	}
	assertTxns(t, f, insertTxn, []string{"select Port"}, []string{"mutate Bridge"})
	if m := fmt.Sprint(f.txn(3)[0]["mutations"]); !strings.Contains(m, "made-1") {
		t.Errorf("the port was not unlinked: %s", m)
	}
	n.assertIPAM(1, 1)
	if _, err := os.Lstat(filepath.Join(n.root, "u1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pod's link left: %v", err)
	}
}
