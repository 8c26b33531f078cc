package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestNetworkAttachmentDefinitionMatchesLocalCluster renders the chart as hack/cluster/install.sh
// installs it (its values file and its one --set of the node's OVSDB socket) with the
// NetworkAttachmentDefinition turned on: its network config must name the local cluster's bridge
// and fstack subnet (hack/cluster/lib.sh), so the Multus path works there as the chained conflist
// does, declare the ips and mac capabilities Multus needs to pass a port's static addresses and
// MAC, and name no node path (fstack-cni refuses one other than its node config's).
func TestNetworkAttachmentDefinitionMatchesLocalCluster(t *testing.T) {
	lib := shellVars(t, filepath.Join(root, "hack", "cluster", "lib.sh"))
	const ovsdb = "/work/x/.cache/cluster/run/ovs/db.sock" // what install.sh passes: readlink -f $OVS_DIR/db.sock
	out, stderr, err := helm(t, "template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
		"-f", filepath.Join(root, "hack", "cluster", "values.yaml"), "--set", "cni.nodeAgent.ovsdbSocket="+ovsdb,
		"--set", "networkAttachmentDefinition.enabled=true", "--set", "networkAttachmentDefinition.namespaces={fstack-demo}")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	nads := find(objects(t, out), "NetworkAttachmentDefinition")
	if len(nads) != 1 {
		t.Fatalf("%d NetworkAttachmentDefinitions, want 1", len(nads))
	}
	raw, _, _ := unstructured.NestedString(nads[0].Object, "spec", "config")
	var conf struct {
		Type, Bridge string
		Capabilities map[string]bool
		IPAM         struct{ Type, Subnet, Gateway string }
	}
	if err := json.Unmarshal([]byte(raw), &conf); err != nil {
		t.Fatalf("spec.config is not JSON: %v\n%s", err, raw)
	}
	gateway := regexp.MustCompile(`/.*$`).ReplaceAllString(lib["NODE_SENDER_ADDR"], "")
	for _, c := range []struct{ what, got, want string }{
		{"type", conf.Type, "fstack-cni"},
		{"bridge", conf.Bridge, lib["OVS_BRIDGE"]},
		{"ipam.subnet", conf.IPAM.Subnet, lib["FSTACK_SUBNET"]},
		{"ipam.gateway", conf.IPAM.Gateway, gateway},
	} {
		if c.got != c.want || c.want == "" {
			t.Errorf("%s is %q, the local cluster's is %q", c.what, c.got, c.want)
		}
	}
	if !conf.Capabilities["ips"] || !conf.Capabilities["mac"] {
		t.Errorf("capabilities %v, want ips and mac", conf.Capabilities)
	}
	assertNoNodePaths(t, "the NetworkAttachmentDefinition's spec.config", raw)
	// up.sh writes the local cluster's node config; the chart's installer leaves it alone there.
	if strings.Contains(out, "--node-config") {
		t.Error("the installer writes the node config on the local cluster, where up.sh does")
	}
}

// nodePathKeys are what fstack-cni takes from its node config only.
var nodePathKeys = []string{"ovsdbSocket", "socketRoot", "kubeletRootDir", "deviceInfoDir", "logFile"}

func assertNoNodePaths(t *testing.T, what, raw string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", what, err, raw)
	}
	for _, k := range nodePathKeys {
		if _, ok := m[k]; ok {
			t.Errorf("%s names %s (%v): fstack-cni refuses a node path other than its node config's", what, k, m[k])
		}
	}
}

// shellVars reads the plain NAME=value assignments of a shell file.
func shellVars(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)=([^$"'\s]+)$`).FindAllStringSubmatch(string(b), -1) {
		vars[m[1]] = m[2]
	}
	return vars
}

// A vhost-user port's queues are the StackInstance's: an fstack-cni config of the chart that sets
// queues or queueSize (which fstack-cni refuses at every ADD) is refused at install, naming the
// value and the StackInstance field.
func TestCNIConfigWithQueuesRefused(t *testing.T) {
	for _, set := range [][]string{
		{"networkAttachmentDefinition.enabled=true", "networkAttachmentDefinition.namespaces={web}", "networkAttachmentDefinition.config.queues=4"},
		{"cni.conflist.enabled=true", "cni.conflist.plugin.queueSize=1024"},
	} {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		_, stderr, err := helm(t, args...)
		key, _, _ := strings.Cut(set[len(set)-1], "=")
		field := key[strings.LastIndex(key, ".")+1:]
		if err == nil || !strings.Contains(stderr, key+": fstack-cni no longer takes it") || !strings.Contains(stderr, "spec.ports[].device.vhostUser."+field) {
			t.Errorf("--set %v: want refused naming %s, got %v\n%s", set, key, err, stderr)
		}
	}
}

// The OVS bridge is one value, cni.nodeAgent.bridge: the node agent checks it and both network
// configs the chart writes (the NetworkAttachmentDefinition's, the conflist entry's) name it, so
// the bridge the agent vouches for is the one fstack-cni adds ports to. The network configs' own
// bridge is deprecated: the same bridge still installs (values written for older charts), another
// is refused naming both values.
func TestBridgeIsOneValue(t *testing.T) {
	base := []string{"networkAttachmentDefinition.enabled=true", "networkAttachmentDefinition.namespaces={web}", "cni.conflist.enabled=true"}
	tmpl := func(sets ...string) (string, string, error) {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
		for _, s := range append(append([]string{}, base...), sets...) {
			args = append(args, "--set", s)
		}
		return helm(t, args...)
	}
	bridges := func(out string) (agent []string, nad, conflist string) {
		for _, m := range regexp.MustCompile(`--bridge=(\S+)`).FindAllStringSubmatch(out, -1) {
			agent = append(agent, m[1])
		}
		nads := find(objects(t, out), "NetworkAttachmentDefinition")
		if len(nads) != 1 {
			t.Fatalf("%d NetworkAttachmentDefinitions, want 1", len(nads))
		}
		raw, _, _ := unstructured.NestedString(nads[0].Object, "spec", "config")
		var c struct{ Bridge string }
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`--plugin-config=(\{.*\})'?`).FindStringSubmatch(out)
		if m == nil {
			t.Fatal("no --plugin-config in the CNI DaemonSet")
		}
		var p struct{ Bridge string }
		if err := json.Unmarshal([]byte(m[1]), &p); err != nil {
			t.Fatalf("--plugin-config: %v\n%s", err, m[1])
		}
		return agent, c.Bridge, p.Bridge
	}
	for _, c := range []struct {
		name string
		sets []string
		want string
	}{
		{"default", nil, "br-fstack"},
		{"the one value", []string{"cni.nodeAgent.bridge=br-data"}, "br-data"},
		{"deprecated keys naming the same bridge", []string{"cni.nodeAgent.bridge=br-data",
			"networkAttachmentDefinition.config.bridge=br-data", "cni.conflist.plugin.bridge=br-data"}, "br-data"},
	} {
		out, stderr, err := tmpl(c.sets...)
		if err != nil {
			t.Errorf("%s: helm template: %v\n%s", c.name, err, stderr)
			continue
		}
		agent, nad, conflist := bridges(out)
		// The node agent's, the installer's, and the installer's again in its two probes.
		sameBridge := len(agent) == 4
		for _, b := range agent {
			sameBridge = sameBridge && b == c.want
		}
		if !sameBridge || nad != c.want || conflist != c.want {
			t.Errorf("%s: node agent and installer --bridge %v, NetworkAttachmentDefinition %q, conflist %q; want all %q",
				c.name, agent, nad, conflist, c.want)
		}
	}
	for _, key := range []string{"networkAttachmentDefinition.config.bridge", "cni.conflist.plugin.bridge"} {
		_, stderr, err := tmpl(key + "=br-other")
		want := key + ` is "br-other" but cni.nodeAgent.bridge is "br-fstack"`
		if err == nil || !strings.Contains(stderr, want) || !strings.Contains(stderr, "set cni.nodeAgent.bridge=br-other") {
			t.Errorf("--set %s=br-other: want refused with %q, got %v\n%s", key, want, err, stderr)
		}
	}
}
