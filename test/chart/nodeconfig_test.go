package chart

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-fstack/kube-fstack/internal/netplan"
)

// nodeConf is cni/internal/nodeconf.Conf, which a test outside cni/ cannot import; decoded
// strictly, as the installer does.
type nodeConf struct {
	OVSDBSocket    string         `json:"ovsdbSocket"`
	SocketRoot     string         `json:"socketRoot"`
	KubeletRootDir string         `json:"kubeletRootDir"`
	DeviceInfoDir  string         `json:"deviceInfoDir"`
	LogFile        string         `json:"logFile"`
	Namespaces     []string       `json:"namespaces"`
	Networks       []netplan.Spec `json:"networks"`
	DefaultNetwork string         `json:"defaultNetwork"`
}

// The installer writes fstack-cni's node config from the chart's values: the node's paths (the
// same values the node agent and the DaemonSet's mounts use) and the namespaces fstack-cni
// serves, a document the plugin's own parser takes, into /etc/kube-fstack mounted alone; the
// conflist's entry names no node path.
func TestCNINodeConfigRendered(t *testing.T) {
	out, stderr, err := helm(t, "template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
		"--set", "cni.nodeConfig.namespaces={web,db}", "--set", "cni.nodeAgent.ovsdbSocket=/run/ovs/db.sock",
		"--set", "vhostSocketRoot=/run/kfs/vhost", "--set", "kubeletRootDir=/data/kubelet", "--set", "cni.conflist.enabled=true")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	ds := find(objects(t, out), "DaemonSet")
	if len(ds) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(ds))
	}
	containers, _, _ := unstructured.NestedSlice(ds[0].Object, "spec", "template", "spec", "containers")
	args := map[string]string{}
	for _, c := range containers {
		c := c.(map[string]any)
		if c["name"] != "installer" {
			continue
		}
		for _, a := range c["args"].([]any) {
			k, v, _ := strings.Cut(a.(string), "=")
			args[k] = v
		}
	}
	if args["--node-config"] != "/host/kube-fstack-etc/cni.json" {
		t.Errorf("--node-config %q", args["--node-config"])
	}
	dec := json.NewDecoder(strings.NewReader(args["--node-config-data"]))
	dec.DisallowUnknownFields()
	var conf nodeConf
	if err := dec.Decode(&conf); err != nil {
		t.Fatalf("--node-config-data %s: %v", args["--node-config-data"], err)
	}
	want := nodeConf{OVSDBSocket: "/run/ovs/db.sock", SocketRoot: "/run/kfs/vhost", KubeletRootDir: "/data/kubelet",
		DeviceInfoDir: "/var/run/k8s.cni.cncf.io/devinfo/cni", LogFile: "/var/log/kube-fstack/fstack-cni.log", Namespaces: []string{"web", "db"},
		Networks: []netplan.Spec{{Name: "fstack-data", Subnets: []string{"10.56.0.0/24"}, Gateways: []string{"10.56.0.1"},
			Grants: []netplan.Grant{{Namespaces: []string{"web", "db"}, Ranges: []string{"10.56.0.0/24"}}}}},
		DefaultNetwork: "fstack-data"}
	if !reflect.DeepEqual(conf, want) {
		t.Errorf("node config %+v, want %+v", conf, want)
	}
	if !contains(hostPaths(t, ds[0]), "/etc/kube-fstack") {
		t.Errorf("host paths %v: /etc/kube-fstack not mounted", hostPaths(t, ds[0]))
	}
	assertNoNodePaths(t, "the conflist's fstack-cni entry", args["--plugin-config"])
}

// What fstack-cni would refuse at every ADD is refused at install, naming the value and the fix:
// a network config naming a node path, and the release namespace (the injector never serves it).
func TestCNINodePathsInNetworkConfigRefused(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"networkAttachmentDefinition.enabled=true", "networkAttachmentDefinition.namespaces={web}", "networkAttachmentDefinition.config.logFile=/etc/ld.so.preload"},
			"networkAttachmentDefinition.config.logFile: fstack-cni takes the node's paths from its node config"},
		{[]string{"networkAttachmentDefinition.enabled=true", "networkAttachmentDefinition.namespaces={web}", "networkAttachmentDefinition.config.deviceInfoDir=/etc"},
			"networkAttachmentDefinition.config.deviceInfoDir: fstack-cni takes"},
		{[]string{"cni.conflist.enabled=true", "cni.conflist.plugin.kubeletRootDir=/x"}, "cni.conflist.plugin.kubeletRootDir: fstack-cni takes"},
		{[]string{"cni.nodeConfig.namespaces={web," + namespace + "}"}, "cni.nodeConfig.namespaces: " + namespace + " is the release namespace"},
	} {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		_, stderr, err := helm(t, args...)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("--set %v: want refused with %q, got %v\n%s", c.set, c.want, err, stderr)
		}
	}
}
