package plugin

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
)

func TestPortNameIsShortStableAndPerAttachment(t *testing.T) {
	a, b := portName("c1", "net1"), portName("c1", "net2")
	if len(a) != 15 || !strings.HasPrefix(a, "fsk") {
		t.Fatalf("port name %q: want fsk + 12 hex, 15 bytes like a kernel ifname", a)
	}
	// The contract in cni/README.md: fsk + the first 6 bytes of sha256("c1/net1"), in hex.
	if a != "fskca3ed83f20a1" {
		t.Errorf("port name %q changed; DEL of ports made by an older version would miss them", a)
	}
	if a == b || a != portName("c1", "net1") {
		t.Errorf("names %q %q must differ per interface and repeat per attachment", a, b)
	}
}

func TestStableMACIsLocallyAdministeredUnicastAndPerInterface(t *testing.T) {
	for _, uid := range []string{"u1", "u2", "7d3c5b2a-0000-4000-8000-000000000001", ""} {
		mac, err := net.ParseMAC(stableMAC(uid, "net1"))
		if err != nil || len(mac) != 6 || mac[0]&0x02 == 0 || mac[0]&0x01 != 0 {
			t.Fatalf("mac %v (%v) for %q is not locally administered unicast", mac, err, uid)
		}
	}
	first, again, other := stableMAC("u1", "net1"), stableMAC("u1", "net1"), stableMAC("u1", "net2")
	if first != again || first == other {
		t.Fatal("the MAC must repeat for the same pod and interface and differ between interfaces")
	}
}

func testConf(t *testing.T, over map[string]any) *NetConf {
	t.Helper()
	conf, err := parseConf(confJSON(t, over))
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

func TestNewAttachmentPathsAndMACPrecedence(t *testing.T) {
	args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", Netns: "/run/netns/p"}
	pod := podArgs{UID: "u1", Namespace: "ns", Name: "p"}
	a := newAttachment(testConf(t, map[string]any{"socketRoot": "/s", "podSocketDir": "/in-pod", "deviceInfoDir": "/d"}), args, pod)
	if a.PodDir != "/s/u1" || a.Socket != "/s/u1/net1.sock" || a.PodSocket != "/in-pod/net1.sock" ||
		a.DevInfoFile != "/d/fstack-c1-net1-device-info.json" || a.devInfoInPodDir() != "/s/u1/net1.json" {
		t.Fatalf("paths %+v", a)
	}
	if a.MAC != stableMAC("u1", "net1") {
		t.Errorf("mac %s, want the stable one", a.MAC)
	}
	a = newAttachment(testConf(t, map[string]any{"mac": "02:00:00:00:00:01"}), args, pod)
	if a.MAC != "02:00:00:00:00:01" {
		t.Errorf("config mac ignored: %s", a.MAC)
	}
	a = newAttachment(testConf(t, map[string]any{"mac": "02:00:00:00:00:01",
		"runtimeConfig": map[string]any{"mac": "02:00:00:00:00:02", "CNIDeviceInfoFile": "/multus/f.json"}}), args, pod)
	if a.MAC != "02:00:00:00:00:02" || a.DevInfoFile != "/multus/f.json" {
		t.Errorf("runtimeConfig must win: mac %s, device info %s", a.MAC, a.DevInfoFile)
	}
}

// A container ID with a slash must not make the NPWG file land in another directory.
func TestDeviceInfoFileStaysInItsDirectory(t *testing.T) {
	a := newAttachment(testConf(t, map[string]any{"deviceInfoDir": "/d"}), &skel.CmdArgs{ContainerID: "../../etc/x", IfName: "net1"}, podArgs{})
	if filepath.Dir(a.DevInfoFile) != "/d" {
		t.Fatalf("device info file %s escapes /d", a.DevInfoFile)
	}
	if a.PodDir != "" || a.Socket != "" {
		t.Fatalf("no pod UID must mean no pod directory: %+v", a)
	}
}

func TestCheckSocketPathAtTheSunPathLimit(t *testing.T) {
	args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1"}
	pod := podArgs{UID: "u"}
	// socketRoot + "/u/net1.sock" is len(root)+12 bytes.
	fits := "/" + strings.Repeat("r", maxSocketPath-12-1)
	if err := newAttachment(testConf(t, map[string]any{"socketRoot": fits}), args, pod).checkSocketPath(); err != nil {
		t.Fatalf("a %d-byte path must fit: %v", maxSocketPath, err)
	}
	long := fits + "r"
	err := newAttachment(testConf(t, map[string]any{"socketRoot": long}), args, pod).checkSocketPath()
	if err == nil || !strings.Contains(err.Error(), "108 bytes") {
		t.Fatalf("a 108-byte path: %v", err)
	}
	inPod := "/" + strings.Repeat("p", maxSocketPath)
	if err := newAttachment(testConf(t, map[string]any{"podSocketDir": inPod}), args, pod).checkSocketPath(); err == nil {
		t.Fatal("the in-pod path is limited too")
	}
}
