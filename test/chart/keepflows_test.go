package chart

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The flow keeper runs in the installer container, whether or not the node agent does: with it
// the installer alone mounts OVS's run directory and is told the OVSDB socket; without either
// nothing mounts OVS; without the agent the installer answers no OVS questions (its answers
// file would be on no volume).
func TestKeepFlowsInTheInstaller(t *testing.T) {
	for _, tc := range []struct {
		agent, keep      bool
		mountsOVS, keeps bool
		answers          string
	}{
		{agent: true, keep: true, mountsOVS: true, keeps: true, answers: "--ovs-answers=/run/kube-fstack-node/ovs.json"},
		{agent: false, keep: true, mountsOVS: true, keeps: true, answers: "--ovs-answers="},
		{agent: true, keep: false, mountsOVS: true, answers: "--ovs-answers=/run/kube-fstack-node/ovs.json"},
		{agent: false, keep: false, answers: "--ovs-answers="},
	} {
		name := fmt.Sprintf("agent=%v,keepFlows=%v", tc.agent, tc.keep)
		out, stderr, err := helm(t, "template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
			"--set", fmt.Sprintf("cni.nodeAgent.enabled=%v", tc.agent), "--set", fmt.Sprintf("cni.keepFlows.enabled=%v", tc.keep))
		if err != nil {
			t.Fatalf("%s: helm template: %v\n%s", name, err, stderr)
		}
		var ds *unstructured.Unstructured
		for _, o := range find(objects(t, out), "DaemonSet") {
			ds = o
		}
		if ds == nil {
			t.Fatalf("%s: no DaemonSet", name)
		}
		containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
		var args []string
		var mounts []string
		for _, c := range containers {
			ctr, _ := c.(map[string]any)
			if ctr["name"] != "installer" {
				continue
			}
			a, _, _ := unstructured.NestedStringSlice(ctr, "args")
			args = a
			ms, _, _ := unstructured.NestedSlice(ctr, "volumeMounts")
			for _, m := range ms {
				mounts = append(mounts, m.(map[string]any)["name"].(string))
			}
		}
		paths := hostPaths(t, ds)
		mountsOVS := slices.Contains(mounts, "ovs-run") && slices.Contains(paths, "/var/run/openvswitch")
		if mountsOVS != tc.mountsOVS || slices.Contains(paths, "/var/run/openvswitch") != tc.mountsOVS {
			t.Errorf("%s: installer mounts %v, host paths %v; want OVS's run dir: %v", name, mounts, paths, tc.mountsOVS)
		}
		hasSocket := slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--ovsdb-socket=/host/ovs/") })
		if hasSocket != tc.mountsOVS || slices.Contains(args, "--keep-flows") != tc.keeps ||
			slices.Contains(args, "--keep-flows-period=30s") != tc.keeps || !slices.Contains(args, tc.answers) {
			t.Errorf("%s: installer args %v", name, args)
		}
	}
}

// The kubelet's reservedSystemCPUs reach the node agent only when set: unset, the agent takes the
// kubelet's own pick (internal/nodecheck/pmd.go).
func TestNodeAgentKubeletReservedCPUs(t *testing.T) {
	for set, want := range map[string]string{"": "", "0-1,4": "--kubelet-reserved-cpus=0-1,4"} {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
		if set != "" {
			args = append(args, "--set-string", "cni.nodeAgent.kubeletReservedCPUs="+strings.ReplaceAll(set, ",", `\,`))
		}
		out, stderr, err := helm(t, args...)
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, stderr)
		}
		var got []string
		for _, ds := range find(objects(t, out), "DaemonSet") {
			containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				ctr, _ := c.(map[string]any)
				if ctr["name"] != "node-agent" {
					continue
				}
				a, _, _ := unstructured.NestedStringSlice(ctr, "args")
				got = slices.DeleteFunc(a, func(s string) bool { return !strings.HasPrefix(s, "--kubelet-reserved-cpus") })
			}
		}
		if (want == "" && len(got) != 0) || (want != "" && !slices.Equal(got, []string{want})) {
			t.Errorf("kubeletReservedCPUs=%q: node agent args %v, want %q", set, got, want)
		}
	}
}
