package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// A pod's socket directory is mounted read-write into its dataplane container, which runs as
// root: whatever it plants there, and whatever else lies under the socket root, ADD, CHECK, GC
// and DEL (the real binary, exec'd by libcni, on the real OVS) leave every file they did not
// make as it was. A canary tree beside the root holds what an escaped name would hit.
func TestHostilePodDirectoryLeavesEverythingElseAlone(t *testing.T) {
	n := newNet(t, "1.1.0")
	p := newPod(800)
	c := makeCanary(t, filepath.Join(n.dir, "canary"), n.name)
	n.kubeletMounts(p)
	podDir := n.podVolume(p) // the pod's own emptyDir, which its dataplane (root) writes
	planted := plantHostile(t, n, podDir, c)
	canaryBefore, plantedBefore := nodetest.Tree(t, c), nodetest.Tree(t, planted...)

	n.mustAdd(p) // writes device info beside a symlink at the old writer's fixed temp name
	if err := n.cni().CheckNetworkList(context.Background(), n.confList(), p.rt()); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	n.gc(p)
	for _, target := range []string{filepath.Join(c, "secret"), filepath.Join(c, "devinfo.json")} {
		conf := n.pluginConf()
		conf["cniVersion"], conf["name"] = n.version, n.name
		conf["runtimeConfig"] = map[string]any{"CNIDeviceInfoFile": target}
		stdin, _ := json.Marshal(conf)
		if out, err := execPlugin("DEL", stdin, newPod(801).cniArgs(), newPod(801)); err != nil {
			t.Errorf("DEL naming %s: %v %s", target, err, out)
		}
	}
	n.mustDel(p)
	n.gc()

	nodetest.AssertSameTree(t, canaryBefore, nodetest.Tree(t, c))
	nodetest.AssertSameTree(t, plantedBefore, nodetest.Tree(t, planted...))
	if _, err := os.Lstat(filepath.Join(podDir, p.ifname+".json")); err == nil {
		t.Errorf("the attachment's own device info is still in %s", podDir)
	}
	if got := ports(t); len(got) != 0 {
		t.Errorf("ports left: %v", got)
	}
	if got := ipamLeases(n.ipamDir()); len(got) != 0 {
		t.Errorf("leases left: %v", got)
	}
}

// makeCanary makes the files an escaped path would hit, each 0600: a secret, files named as
// the plugin names its own (a device info of this very network included), an empty directory.
func makeCanary(t *testing.T, dir, network string) string {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(dir, "empty"), 0o700))
	files := map[string]string{"secret": "secret", "secret2": "secret2", "secret.sock": "not a socket",
		"secret.json": hostileDevinfo(network, "c0ffee", "secret"), "devinfo.json": hostileDevinfo(network, "c0ffee", "net9")}
	for name, data := range files {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600))
	}
	return dir
}

func hostileDevinfo(network, cid, ifname string) string {
	b, _ := json.Marshal(map[string]any{"type": "vhost-user", "version": "1.1.0",
		"vhost-user": map[string]any{"mode": "server", "path": "/x/" + ifname + ".sock"},
		"attachment": map[string]any{"network": network, "containerID": cid, "ifname": ifname}})
	return string(b)
}

// plantHostile fills the pod's emptyDir before its ADD and the socket root, and returns what
// must survive every command untouched.
func plantHostile(t *testing.T, n *netw, podDir, c string) []string {
	t.Helper()
	must(t, os.MkdirAll(podDir, 0o755))
	up, _ := filepath.Rel(podDir, filepath.Join(c, "secret"))
	files := map[string]string{
		"evil.json":    hostileDevinfo(n.name, "c0ffee", up),                                        // GC once removed ../../canary/secret.{json,sock}
		"net7.json":    hostileDevinfo(n.name, "../../../x", "net7"),                                // a container ID ADD would refuse
		"net8.json":    hostileDevinfo(n.name, "c0ffee", "net1"),                                    // an ifname that is not its file's
		"net6.json":    `{"type":"vhost-user","version":"1.1.0"` + strings.Repeat(" ", 70000) + `}`, // too large to be ours
		"foreign.txt":  "the pod's own file",
		"foreign.sock": "not a socket",
	}
	for name, data := range files {
		must(t, os.WriteFile(filepath.Join(podDir, name), []byte(data), 0o600))
	}
	links := map[string]string{".devinfo-net1.json.tmp": "secret", "net1.json": "secret2", "net2.json": "secret.json",
		"net2.sock": "secret.sock", "sub": "", "net3.json": "empty"}
	for name, target := range links {
		must(t, os.Symlink(filepath.Join(c, target), filepath.Join(podDir, name)))
	}
	root := n.socketRoot()
	must(t, os.MkdirAll(filepath.Join(root, "foreign-empty"), 0o755))
	must(t, os.Mkdir(filepath.Join(root, "7d3c5b2a-0000-4000-8000-000000000899"), 0o755)) // empty, named like a pod
	must(t, os.MkdirAll(filepath.Join(root, "foreign-full"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "foreign-full", "net1.json"), []byte(hostileDevinfo(n.name, "c0ffee", "net1")), 0o600))
	must(t, os.Symlink(c, filepath.Join(root, "7d3c5b2a-0000-4000-8000-000000000898")))
	out := []string{filepath.Join(root, "foreign-empty"), filepath.Join(root, "foreign-full"),
		filepath.Join(root, "7d3c5b2a-0000-4000-8000-000000000899"), filepath.Join(root, "7d3c5b2a-0000-4000-8000-000000000898")}
	for name := range files {
		out = append(out, filepath.Join(podDir, name))
	}
	for name := range links {
		if name != "net1.json" { // the attachment's own name: ADD replaces the link (never its target)
			out = append(out, filepath.Join(podDir, name))
		}
	}
	return out
}

// gc runs GC with the given pods as the valid attachments.
func (n *netw) gc(valid ...pod) {
	n.t.Helper()
	args := &libcni.GCArgs{}
	for _, p := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: p.containerID, IfName: p.ifname})
	}
	if err := n.cni().GCNetworkList(context.Background(), n.confList(), args); err != nil {
		n.t.Errorf("GC: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
