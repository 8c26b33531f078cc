package node

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/version"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// ADD -> CHECK -> DEL -> DEL for every spec version the plugin supports.
func TestAddCheckDelDelEachVersion(t *testing.T) {
	for i, v := range version.All.SupportedVersions() {
		t.Run(v, func(t *testing.T) {
			n, p := newNet(t, v), newPod(100+i)
			n.mustAdd(p)
			assertAttachment(t, n, p)
			if ge(t, v, "0.4.0") {
				if err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt()); err != nil {
					t.Fatalf("CHECK after ADD: %v", err)
				}
			}
			n.mustDel(p)
			n.assertNothingLeft()
			n.mustDel(p)
		})
	}
}

func ge(t *testing.T, v, min string) bool {
	ok, err := version.GreaterThanOrEqualTo(v, min)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// assertAttachment checks the port, the pod directory and both device-info files.
func assertAttachment(t *testing.T, n *netw, p pod) {
	t.Helper()
	podDir := filepath.Join(n.socketRoot(), p.uid)
	sock := filepath.Join(podDir, p.ifname+".sock")
	if target, err := os.Readlink(podDir); err != nil || target != n.podVolume(p) {
		t.Errorf("the pod's link %s -> %q (%v), want -> its emptyDir %s", podDir, target, err, n.podVolume(p))
	}
	names := ports(t)
	if len(names) != 1 {
		t.Fatalf("want one vhost-user port, have %v", names)
	}
	if got := vsctlGet(t, "Interface", names[0], "options:vhost-server-path"); got != sock {
		t.Errorf("vhost-server-path %s, want %s", got, sock)
	}
	if got := vsctlGet(t, "Interface", names[0], "external_ids:kube-fstack.io/pod-uid"); got != p.uid {
		t.Errorf("pod-uid external id %s", got)
	}
	if got := vsctlGet(t, "Port", names[0], "_uuid"); !strings.Contains(vsctlGet(t, "Bridge", bridge, "ports"), got) {
		t.Errorf("port %s is not on %s", names[0], bridge)
	}
	info, err := podcontract.ReadDevInfo(filepath.Join(podDir, p.ifname+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if info.VhostUser.Path != "/var/run/kube-fstack/vhost/net1.sock" || info.VhostUser.Mode != "server" {
		t.Errorf("device info vhost-user %+v", info.VhostUser)
	}
	if len(info.IPs) != 1 || !strings.HasPrefix(info.IPs[0], "10.99.0.") || info.Gateway != "10.99.0.1" || info.MAC == "" {
		t.Errorf("device info addresses %+v", info)
	}
	// The node's OVS polls on CPU 1 (nodetest: pmd-cpu-mask=0x2).
	if !slices.Equal(info.SwitchCPUs, []int{1}) {
		t.Errorf("device info switchCPUs %v, want [1] (OVS's pmd-cpu-mask 0x2)", info.SwitchCPUs)
	}
	npwg := filepath.Join(n.deviceInfoDir(), n.name+"-"+p.containerID+"-"+p.ifname+"-device-info.json")
	if info, err := podcontract.ReadDevInfo(npwg); err != nil || !slices.Equal(info.SwitchCPUs, []int{1}) {
		t.Errorf("NPWG device info: %+v, %v", info, err)
	}
}

func TestResultCarriesInterfaceIPsAndStableMAC(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(200)
	res := n.mustAdd(p)
	defer n.mustDel(p)
	if len(res.Interfaces) != 1 || res.Interfaces[0].Name != "net1" || res.Interfaces[0].Sandbox != p.netns {
		t.Fatalf("interfaces %+v", res.Interfaces)
	}
	mac := res.Interfaces[0].Mac
	if res.Interfaces[0].SocketPath != filepath.Join(n.socketRoot(), p.uid, "net1.sock") {
		t.Errorf("socketPath %q", res.Interfaces[0].SocketPath)
	}
	if len(res.IPs) != 1 || *res.IPs[0].Interface != 0 || res.IPs[0].Address.IP.To4() == nil {
		t.Fatalf("ips %+v", res.IPs)
	}
	// Locally administered, unicast, and the same for the same pod and interface.
	if hw, err := net.ParseMAC(mac); err != nil || hw[0]&0x02 == 0 || hw[0]&0x01 != 0 {
		t.Errorf("mac %s is not locally administered unicast", mac)
	}
	n.mustDel(p)
	if again := n.mustAdd(p).Interfaces[0].Mac; again != mac {
		t.Errorf("mac changed across ADDs: %s then %s", mac, again)
	}
}

// Chained after the default network plugin: eth0 stays first and our IPs point at our interface.
func TestChainedKeepsPrevResult(t *testing.T) {
	n, p := newNet(t, "1.0.0"), newPod(300)
	conf := n.pluginConf()
	conf["cniVersion"], conf["name"] = n.version, n.name
	conf["prevResult"] = map[string]any{"cniVersion": "1.0.0",
		"interfaces": []any{map[string]any{"name": "eth0", "sandbox": p.netns}},
		"ips":        []any{map[string]any{"address": "10.244.0.7/24", "interface": 0}}}
	stdin, _ := json.Marshal(conf)
	n.kubeletMounts(p)
	out, cerr := execPlugin("ADD", stdin, p.cniArgs(), p)
	if cerr != nil {
		t.Fatalf("chained ADD: %v", cerr)
	}
	defer execPlugin("DEL", stdin, p.cniArgs(), p) //nolint:errcheck // cleanup; asserted elsewhere
	var res struct {
		Interfaces []struct{ Name string }
		IPs        []struct {
			Address   string
			Interface int
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Interfaces) != 2 || res.Interfaces[0].Name != "eth0" || res.Interfaces[1].Name != "net1" {
		t.Fatalf("interfaces %+v", res.Interfaces)
	}
	if len(res.IPs) != 2 || res.IPs[0].Address != "10.244.0.7/24" || res.IPs[1].Interface != 1 {
		t.Fatalf("ips %+v", res.IPs)
	}
}

func TestDelWithoutAddAndWithoutPodUID(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(400)
	n.mustDel(p)
	if _, err := execPlugin("DEL", n.stdin(), "", p); err != nil {
		t.Fatalf("DEL without CNI_ARGS: %v", err)
	}
	n.assertNothingLeft()
}

// The port is the state: a DEL that finds the directory or the port already gone still
// removes the rest.
func TestDelWhenPartsAreAlreadyGone(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(500)
	n.mustAdd(p)
	if err := os.RemoveAll(filepath.Join(n.socketRoot(), p.uid)); err != nil {
		t.Fatal(err)
	}
	n.mustDel(p)
	n.assertNothingLeft()

	n.mustAdd(p)
	if _, err := env.ovs.Vsctl("del-port", bridge, ports(t)[0]); err != nil {
		t.Fatal(err)
	}
	n.mustDel(p)
	n.assertNothingLeft()
}

func TestCheckFailsWhenThePortIsGone(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(600)
	n.mustAdd(p)
	defer n.mustDel(p)
	if _, err := env.ovs.Vsctl("del-port", bridge, ports(t)[0]); err != nil {
		t.Fatal(err)
	}
	err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt())
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("CHECK with the port gone: %v", err)
	}
}

// A second ADD of the same attachment (a runtime that lost its state retries) replaces the
// port the first left, instead of failing on OVSDB's unique port name or the Port's UUID (the
// same for both: ADD derives it from the name) or keeping it. The Interface row's UUID, which
// OVSDB chooses, tells the replacement from the original.
func TestAddAgainReplacesTheStalePort(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(700)
	n.withIPAM = false // host-local refuses a second lease for the same attachment
	n.mustAdd(p)
	first := vsctlGet(t, "Interface", ports(t)[0], "_uuid")
	n.mustAdd(p)
	names := ports(t)
	if len(names) != 1 {
		t.Fatalf("ports after the second ADD: %v", names)
	}
	if second := vsctlGet(t, "Interface", names[0], "_uuid"); second == first {
		t.Errorf("the second ADD kept the first ADD's port (interface %s)", first)
	}
	sock := vsctlGet(t, "Interface", names[0], "options:vhost-server-path")
	if want := filepath.Join(n.socketRoot(), p.uid, "net1.sock"); sock != want {
		t.Errorf("socket %s, want %s", sock, want)
	}
	n.mustDel(p)
	n.assertNothingLeft()
}
