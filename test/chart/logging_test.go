package chart

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// One logging value reaches every binary the chart configures, each the way it takes it: the
// operator as --log-format/--log-level (it passes them on to the pods it injects), the CNI
// plugin as logFormat/logLevel in both of its network configs (the conflist's plugin and the
// NetworkAttachmentDefinition). The defaults add nothing to the network configs.
func TestLoggingReachesEveryBinary(t *testing.T) {
	for _, c := range []struct {
		format, level string
		inConfig      bool
	}{{"text", "info", false}, {"json", "debug", true}} {
		out, stderr, err := helm(t, "template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
			"--set", "logging.format="+c.format, "--set", "logging.level="+c.level,
			"--set", "cni.conflist.enabled=true",
			"--set", "networkAttachmentDefinition.enabled=true", "--set", "networkAttachmentDefinition.namespaces={fstack-demo}")
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, stderr)
		}
		objs := objects(t, out)
		flags := operatorFlags(t, find(objs, "Deployment")[0])
		if flags["--log-format"] != c.format || flags["--log-level"] != c.level {
			t.Errorf("%s/%s: operator flags %v", c.format, c.level, flags)
		}
		// The node DaemonSet's containers (installer, node agent) and the uninstall hook's take
		// the flags every binary takes.
		var nodeContainers int
		for _, o := range append(find(objs, "DaemonSet"), find(objs, "Job")...) {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				args, _, _ := unstructured.NestedStringSlice(ctr.(map[string]any), "args")
				nodeContainers++
				if !slices.Contains(args, "--log-format="+c.format) || !slices.Contains(args, "--log-level="+c.level) {
					t.Errorf("%s/%s: %s container %v has no log flags: %v", c.format, c.level, o.GetKind(), ctr.(map[string]any)["name"], args)
				}
			}
		}
		if nodeContainers != 3 {
			t.Errorf("%s/%s: %d containers in DaemonSets and Jobs, want the installer, the node agent and node-cleanup", c.format, c.level, nodeContainers)
		}
		var configs []string
		for _, nad := range find(objs, "NetworkAttachmentDefinition") {
			raw, _, _ := unstructured.NestedString(nad.Object, "spec", "config")
			configs = append(configs, raw)
		}
		for _, ds := range find(objs, "DaemonSet") {
			containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				args, _, _ := unstructured.NestedStringSlice(ctr.(map[string]any), "args")
				for _, a := range args {
					if v, ok := strings.CutPrefix(a, "--plugin-config="); ok {
						configs = append(configs, v)
					}
				}
			}
		}
		if len(configs) != 2 {
			t.Fatalf("%s/%s: %d CNI network configs, want the NetworkAttachmentDefinition's and the conflist's", c.format, c.level, len(configs))
		}
		for _, raw := range configs {
			var conf map[string]any
			if err := json.Unmarshal([]byte(raw), &conf); err != nil {
				t.Fatalf("%v\n%s", err, raw)
			}
			_, hasFormat := conf["logFormat"]
			_, hasLevel := conf["logLevel"]
			if c.inConfig && (conf["logFormat"] != c.format || conf["logLevel"] != c.level) || !c.inConfig && (hasFormat || hasLevel) {
				t.Errorf("%s/%s: network config %s", c.format, c.level, raw)
			}
		}
	}
}
