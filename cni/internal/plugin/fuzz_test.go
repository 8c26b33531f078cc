package plugin

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// confFields are the members parseConf's refusals may name.
var confFields = []string{"type", "socketRoot", "podSocketDir", "deviceInfoDir", "runtimeConfig.CNIDeviceInfoFile",
	"mtu", "bridge", "mac"}

// The network config comes from the runtime's stdin: parseConf never panics, and what it
// refuses for its content names the member.
func FuzzParseConf(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"fstack-net","type":"fstack-cni","bridge":"br-fstack","ovsdbSocket":"/var/run/openvswitch/db.sock",
		"socketRoot":"/var/run/kube-fstack/vhost","podSocketDir":"/var/run/kube-fstack/vhost","mtu":1500,
		"logFile":"/var/log/kube-fstack/fstack-cni.log","ipam":{"type":"host-local","subnet":"10.56.0.0/24","gateway":"10.56.0.1"}}`))
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"n","type":"fstack-cni","runtimeConfig":{"mac":"02:00:00:00:00:01","CNIDeviceInfoFile":"/var/run/k8s.cni.cncf.io/devinfo/cni/x.json"},
		"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"net1","sandbox":"/proc/1/ns/net"}]},"cni.dev/valid-attachments":[{"containerID":"c","ifname":"net1"}]}`))
	for _, s := range []string{`{"queues":17}`, `{"mtu":1}`, `{"bridge":"a b"}`, `{"socketRoot":"rel"}`,
		`{"deviceInfoDir":"x"}`, `{"runtimeConfig":{"CNIDeviceInfoFile":"../x"}}`, `{"mac":"01:00:00:00:00:00"}`,
		`{"type":"bridge"}`, `{"MTU":9000,"mtu":1500}`, `{"ipam":null}`, `[]`, `{"name":"n"} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := parseConf(data)
		var te *types.Error
		if err == nil || !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig {
			return
		}
		for _, field := range confFields {
			if strings.Contains(te.Msg, field) {
				return
			}
		}
		t.Fatalf("%q: refusal %q names no member", data, te.Msg)
	})
}

// A device info read back by GC is the pod's to write. Whatever names it holds, the ones
// validAttachment lets through name files in the pod directory and the device-info directory,
// never beside or above them.
func FuzzAttachmentNames(f *testing.F) {
	f.Add("c0ffee", "net1", "7d3c5b2a-0000-4000-8000-000000000001", "net1.json")
	f.Add("c0ffee", "../../victim/secret", "", "evil.json")
	f.Add("../x", "net1", "", "net1.json")
	f.Add("c", "..", "u", "...json")
	f.Add("c", "a/b", "../u", "a/b.json")
	f.Fuzz(func(t *testing.T, cid, ifname, uid, file string) {
		const root, devDir = "/run/vhost", "/run/devinfo"
		podDir := root + "/pod"
		at := &podcontract.DevInfoAttachment{Network: "net", ContainerID: cid, IfName: ifname, PodUID: uid}
		if validAttachment(at, file, podDir) != nil {
			return
		}
		conf := &NetConf{SocketRoot: root, PodSocketDir: "/pod", DeviceInfoDir: devDir}
		conf.Name = "net"
		a := newAttachment(conf, &skel.CmdArgs{ContainerID: cid, IfName: ifname}, podArgs{})
		a.setPodDir(conf, podDir)
		for _, p := range []string{a.Socket, a.devInfoInPodDir()} {
			if filepath.Dir(p) != podDir {
				t.Fatalf("names %q %q let %s out of %s", cid, ifname, p, podDir)
			}
		}
		if filepath.Dir(a.DevInfoFile) != devDir {
			t.Fatalf("names %q %q let %s out of %s", cid, ifname, a.DevInfoFile, devDir)
		}
	})
}
