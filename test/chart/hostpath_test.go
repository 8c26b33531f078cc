package chart

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Every host path the chart mounts, in every value set, is one the DaemonSet's work needs: the
// CNI's own directories, fstack-cni's node config directory, kube-fstack's root, OVSDB's socket directory, the kubelet's CPU
// manager checkpoint as a single file, and kube-fstack's own directory beneath the kubelet's
// seccomp root (the dataplane's Localhost profile; never the seccomp root itself). Never the kubelet's root dir (its client key, every pod's
// secret volumes), never a directory above what is needed.
func TestHostPathsConfined(t *testing.T) {
	allowed := map[string]bool{
		"/opt/cni/bin":                         true,
		"/etc/cni/net.d":                       true,
		"/etc/kube-fstack":                     true,
		"/var/run/kube-fstack/vhost":           true,
		"/var/run/kube-fstack":                 true,
		"/var/run/openvswitch":                 true,
		"/var/lib/kubelet/cpu_manager_state":   true,
		"/var/lib/kubelet/seccomp/kube-fstack": true,
	}
	seen := 0
	for _, set := range valueSets(t) {
		for _, o := range objects(t, render(t, set)) {
			for _, path := range hostPaths(t, o) {
				seen++
				if !allowed[path] {
					t.Errorf("%s: %s %s mounts host path %s, outside the chart's allow-list", set, o.GetKind(), o.GetName(), path)
				}
				if strings.TrimSuffix(path, "/") == "/var/lib/kubelet" {
					t.Errorf("%s: %s %s mounts the kubelet's root dir", set, o.GetKind(), o.GetName())
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no hostPath volume in any value set: the DaemonSet's volumes moved, update this test")
	}
}

// hostPaths lists the hostPath volumes of a workload's pod template.
func hostPaths(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	volumes, found, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
	if err != nil || !found {
		return nil
	}
	var out []string
	for _, v := range volumes {
		vol, _ := v.(map[string]any)
		if path, ok, _ := unstructured.NestedString(vol, "hostPath", "path"); ok {
			out = append(out, path)
		}
	}
	return out
}

// OVS's run directory holds OVSDB's and ovs-vswitchd's sockets, and a connection to either is
// full control of OVS (root: a dpdk port with a pcap devargs writes any host file); a read-only
// mount does not stop a connect. Only the installer container, root on the host already, may
// mount it: the node agent gets the installer's answers through a pod-local emptyDir.
func TestOnlyTheInstallerMountsOVS(t *testing.T) {
	for _, set := range valueSets(t) {
		for _, o := range objects(t, render(t, set)) {
			ovsVolumes := map[string]bool{}
			volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range volumes {
				vol, _ := v.(map[string]any)
				if path, ok, _ := unstructured.NestedString(vol, "hostPath", "path"); ok && strings.Contains(path, "openvswitch") {
					ovsVolumes[vol["name"].(string)] = true
				}
			}
			for _, kind := range []string{"containers", "initContainers"} {
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", kind)
				for _, c := range containers {
					ctr, _ := c.(map[string]any)
					mounts, _, _ := unstructured.NestedSlice(ctr, "volumeMounts")
					for _, m := range mounts {
						mount, _ := m.(map[string]any)
						if ovsVolumes[mount["name"].(string)] && ctr["name"] != "installer" {
							t.Errorf("%s: %s %s: container %s mounts OVS's run directory", set, o.GetKind(), o.GetName(), ctr["name"])
						}
					}
					if ctr["name"] == "node-agent" && strings.Contains(fmt.Sprint(ctr["args"]), "ovsdb") {
						t.Errorf("%s: the node agent is told of an OVSDB socket: %v", set, ctr["args"])
					}
				}
			}
		}
	}
}
