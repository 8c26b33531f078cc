package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/cni/internal/plugin"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/netplan"
)

// netw is one network config under test, with its own directories.
type netw struct {
	t        *testing.T
	name     string
	version  string
	dir      string
	ovsdb    string
	bridge   string
	withIPAM bool
	extra    map[string]any
	// plan, when set, is the node config's one network and its default: ADD holds every port
	// to it. Unset, the node enforces no plan (as one installed before DataNetworks).
	plan *netplan.Spec
}

// localNetwork is the DataNetwork of the node tests' subnet as the platform would write it: the
// router 10.99.0.1, and every other address of the subnet granted to namespace default.
func localNetwork() *netplan.Spec {
	return &netplan.Spec{Name: "fstack-data", Subnets: []string{"10.99.0.0/24"}, Gateways: []string{"10.99.0.1"},
		Grants: []netplan.Grant{{Namespaces: []string{"default"}, Ranges: []string{"10.99.0.0/24"}}}}
}

func newNet(t *testing.T, version string) *netw {
	t.Helper()
	dir, err := os.MkdirTemp(env.tmp, "t-")
	if err != nil {
		t.Fatal(err)
	}
	return &netw{t: t, name: "fstack", version: version, dir: dir, ovsdb: env.ovs.DBSock(), bridge: bridge, withIPAM: true}
}

func (n *netw) socketRoot() string    { return filepath.Join(n.dir, "vhost") }
func (n *netw) kubeletDir() string    { return filepath.Join(n.dir, "kubelet") }
func (n *netw) deviceInfoDir() string { return filepath.Join(n.dir, "devinfo") }
func (n *netw) ipamDir() string       { return filepath.Join(n.dir, "ipam") }

// pluginConf is the network config, which names no node path: those are the node config's,
// which it writes (extra's node paths go there), as the installer does on a node.
func (n *netw) pluginConf() map[string]any {
	c := map[string]any{"type": "fstack-cni", "bridge": n.bridge, "mtu": 1500}
	if n.withIPAM {
		c["ipam"] = map[string]any{"type": "host-local", "subnet": "10.99.0.0/24", "gateway": "10.99.0.1", "dataDir": n.ipamDir()}
	}
	node := &nodeconf.Conf{OVSDBSocket: n.ovsdb, SocketRoot: n.socketRoot(), KubeletRootDir: n.kubeletDir(),
		DeviceInfoDir: n.deviceInfoDir(), LogFile: filepath.Join(n.dir, "fstack-cni.log"), Namespaces: []string{"default"}}
	if n.plan != nil {
		node.Networks, node.DefaultNetwork = []netplan.Spec{*n.plan}, n.plan.Name
	}
	for k, v := range n.extra {
		if k == "socketRoot" {
			node.SocketRoot = v.(string)
			continue
		}
		c[k] = v
	}
	writeNodeConf(n.t, node)
	return c
}

// writeNodeConf writes the node config the test build of fstack-cni reads (buildPlugins).
func writeNodeConf(t *testing.T, node *nodeconf.Conf) {
	t.Helper()
	data, err := node.Encode()
	if have, _ := os.ReadFile(env.nodeConfig); err == nil && !bytes.Equal(have, data) {
		// Replaced whole, as the installer does: concurrent ADDs read it meanwhile.
		err = fsutil.WriteAtomic(env.nodeConfig, data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (n *netw) confList() *libcni.NetworkConfigList {
	n.t.Helper()
	raw, _ := json.Marshal(map[string]any{"cniVersion": n.version, "name": n.name, "plugins": []any{n.pluginConf()}})
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		n.t.Fatal(err)
	}
	return list
}

// pod is one attachment as a runtime (or Multus) describes it.
type pod struct {
	uid, containerID, ifname, netns string
}

func newPod(i int) pod {
	return pod{uid: fmt.Sprintf("7d3c5b2a-0000-4000-8000-%012d", i), containerID: fmt.Sprintf("c0ffee%058d", i),
		ifname: "net1", netns: "/var/run/netns/fsk-pod-unused"}
}

func (p pod) rt() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.containerID, NetNS: p.netns, IfName: p.ifname, Args: [][2]string{
		{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "web-0"}, {"K8S_POD_UID", p.uid},
		{"K8S_POD_INFRA_CONTAINER_ID", p.containerID}}}
}

func (n *netw) cni() *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{env.binDir}, filepath.Join(n.dir, "cache"), nil)
}

func (n *netw) add(p pod) (types.Result, error) {
	n.kubeletMounts(p)
	return n.cni().AddNetworkList(context.Background(), n.confList(), p.rt())
}

// podVolume is p's emptyDir fstack-vhost in the test's kubelet root dir.
func (n *netw) podVolume(p pod) string {
	return filepath.Join(n.kubeletDir(), "pods", p.uid, "volumes", "kubernetes.io~empty-dir", "fstack-vhost")
}

// kubeletMounts stands in for the kubelet, which makes a pod's volumes (the injected emptyDir
// fstack-vhost among them) before it asks the runtime for the sandbox, so before CNI ADD.
func (n *netw) kubeletMounts(p pod) {
	n.t.Helper()
	if err := os.MkdirAll(n.podVolume(p), 0o777); err != nil {
		n.t.Fatal(err)
	}
}

// kubeletRemoves stands in for the kubelet removing a deleted pod's volumes.
func (n *netw) kubeletRemoves(p pod) {
	n.t.Helper()
	if err := os.RemoveAll(filepath.Join(n.kubeletDir(), "pods", p.uid)); err != nil {
		n.t.Fatal(err)
	}
}

func (n *netw) mustAdd(p pod) *current.Result {
	n.t.Helper()
	r, err := n.add(p)
	if err != nil {
		n.t.Fatalf("ADD %s: %v", p.containerID[:10], err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		n.t.Fatal(err)
	}
	return res
}

func (n *netw) del(p pod) error {
	return n.cni().DelNetworkList(context.Background(), n.confList(), p.rt())
}

func (n *netw) mustDel(p pod) {
	n.t.Helper()
	if err := n.del(p); err != nil {
		n.t.Fatalf("DEL %s: %v", p.containerID[:10], err)
	}
}

// execPlugin runs the binary directly, for inputs libcni would refuse to send.
func execPlugin(command string, stdin []byte, cniArgs string, p pod) (string, *types.Error) {
	cmd := exec.Command(filepath.Join(env.binDir, "fstack-cni"))
	cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + p.containerID, "CNI_NETNS=" + p.netns,
		"CNI_IFNAME=" + p.ifname, "CNI_PATH=" + env.binDir, "CNI_ARGS=" + cniArgs}
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err == nil {
		return stdout.String(), nil
	}
	e := &types.Error{}
	if json.Unmarshal(stdout.Bytes(), e) != nil {
		return stdout.String(), &types.Error{Code: 999, Msg: "unparsable error: " + stdout.String()}
	}
	return stdout.String(), e
}

func (n *netw) stdin() []byte {
	c := n.pluginConf()
	c["cniVersion"], c["name"] = n.version, n.name
	b, _ := json.Marshal(c)
	return b
}

func (p pod) cniArgs() string {
	return "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=" + p.uid
}

// ports lists our ports on the instance, by name.
func ports(t *testing.T) []string {
	t.Helper()
	out, err := env.ovs.Vsctl("--no-headings", "--format=csv", "--columns=name", "find", "Interface", "type=dpdkvhostuserclient")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// assertNothingLeft fails when any port, pod link or directory, device-info file or IPAM lease
// exists.
func (n *netw) assertNothingLeft() {
	n.t.Helper()
	if p := ports(n.t); len(p) != 0 {
		n.t.Errorf("OVS ports left: %v", p)
	}
	if d := podDirEntries(n.socketRoot()); len(d) != 0 {
		n.t.Errorf("pod links or directories left in %s: %v", n.socketRoot(), d)
	}
	if d := entries(n.deviceInfoDir()); len(d) != 0 {
		n.t.Errorf("device-info files left: %v", d)
	}
	if leases := ipamLeases(n.ipamDir()); len(leases) != 0 {
		n.t.Errorf("IPAM leases left: %v", leases)
	}
}

// podDirEntries lists the socket root without the node-wide IPAM lock file, which the plugin
// keeps there for good.
func podDirEntries(root string) []string {
	var dirs []string
	for _, e := range entries(root) {
		if e != plugin.IPAMLockFile {
			dirs = append(dirs, e)
		}
	}
	return dirs
}

func entries(dir string) []string {
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// ipamLeases lists host-local's reservation files (one per leased IP, named by the IP).
func ipamLeases(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "10.*"))
	return files
}

func vsctlGet(t *testing.T, args ...string) string {
	t.Helper()
	out, err := env.ovs.Vsctl(append([]string{"get"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(strings.TrimSpace(out), `"`)
}
