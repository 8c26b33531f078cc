package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/cni/internal/plugin"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func asTypesError(err error, te **types.Error) bool { return errors.As(err, te) }

// GC keeps the valid attachments and removes the others, including the files of an ADD killed
// before it made its port.
func TestGCRemovesWhatIsNotValid(t *testing.T) {
	n := newNet(t, "1.1.0")
	keep, drop1, drop2 := newPod(700), newPod(701), newPod(702)
	for _, p := range []pod{keep, drop1, drop2} {
		n.mustAdd(p)
		t.Cleanup(func() { _ = n.del(p) })
	}
	orphan := newPod(703)
	orphanDir := filepath.Join(n.socketRoot(), orphan.uid)
	err := podcontract.WriteDevInfo(filepath.Join(orphanDir, "net1.json"), &podcontract.DevInfo{Type: "vhost-user", Version: "1.1.0",
		VhostUser:  &podcontract.DevInfoVhostUser{Mode: "server", Path: "/x/net1.sock"},
		Attachment: &podcontract.DevInfoAttachment{Network: n.name, ContainerID: orphan.containerID, IfName: "net1"}})
	if err != nil {
		t.Fatal(err)
	}
	// What ADD makes first: the marked pod directory (GC removes only marked ones).
	if err := os.WriteFile(filepath.Join(orphanDir, plugin.PodDirMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	gcArgs := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: keep.containerID, IfName: "net1"}}}
	if err := n.cni().GCNetworkList(context.Background(), n.confList(), gcArgs); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if p := ports(t); len(p) != 1 || vsctlGet(t, "Interface", p[0], "external_ids:kube-fstack.io/container-id") != keep.containerID {
		t.Fatalf("after GC, ports %v", p)
	}
	if d := podDirEntries(n.socketRoot()); len(d) != 1 || d[0] != keep.uid {
		t.Fatalf("after GC, pod dirs %v", d)
	}
	if leases := ipamLeases(n.ipamDir()); len(leases) != 1 {
		t.Fatalf("after GC, IPAM leases %v", leases)
	}
	n.mustDel(keep)
	n.assertNothingLeft()
}
