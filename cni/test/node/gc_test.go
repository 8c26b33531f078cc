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

// GC keeps the valid attachments and removes the others, including the link and files of an ADD
// killed before it made its port, and a marked pod directory of the hostPath layout.
func TestGCRemovesWhatIsNotValid(t *testing.T) {
	n := newNet(t, "1.1.0")
	keep, drop1, drop2 := newPod(700), newPod(701), newPod(702)
	for _, p := range []pod{keep, drop1, drop2} {
		n.mustAdd(p)
		t.Cleanup(func() { _ = n.del(p) })
	}
	orphan, oldOrphan := newPod(703), newPod(704)
	devinfo := func(dir string, p pod) {
		err := podcontract.WriteDevInfo(filepath.Join(dir, "net1.json"), &podcontract.DevInfo{Type: "vhost-user", Version: "1.1.0",
			VhostUser:  &podcontract.DevInfoVhostUser{Mode: "server", Path: "/x/net1.sock"},
			Attachment: &podcontract.DevInfoAttachment{Network: n.name, ContainerID: p.containerID, IfName: "net1"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// What a killed ADD leaves: the link to the pod's emptyDir and the device info in it.
	n.kubeletMounts(orphan)
	devinfo(n.podVolume(orphan), orphan)
	must(t, os.Symlink(n.podVolume(orphan), filepath.Join(n.socketRoot(), orphan.uid)))
	// What the hostPath layout's killed ADD left: a marked pod directory (GC removes only marked ones).
	oldDir := filepath.Join(n.socketRoot(), oldOrphan.uid)
	devinfo(oldDir, oldOrphan)
	must(t, os.WriteFile(filepath.Join(oldDir, plugin.PodDirMarker), nil, 0o644))
	gcArgs := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: keep.containerID, IfName: "net1"}}}
	if err := n.cni().GCNetworkList(context.Background(), n.confList(), gcArgs); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if p := ports(t); len(p) != 1 || vsctlGet(t, "Interface", p[0], "external_ids:kube-fstack.io/container-id") != keep.containerID {
		t.Fatalf("after GC, ports %v", p)
	}
	if d := podDirEntries(n.socketRoot()); len(d) != 1 || d[0] != keep.uid {
		t.Fatalf("after GC, pod links and dirs %v", d)
	}
	if _, err := os.Stat(filepath.Join(n.podVolume(orphan), "net1.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the orphan's device info is left in its emptyDir: %v", err)
	}
	if leases := ipamLeases(n.ipamDir()); len(leases) != 1 {
		t.Fatalf("after GC, IPAM leases %v", leases)
	}
	n.mustDel(keep)
	n.assertNothingLeft()
}
