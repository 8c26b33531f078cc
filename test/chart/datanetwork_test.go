package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/netplan"
)

// renderSet is helm template with --set values, or the test's failure.
func renderSet(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, stderr, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm template --set %v: %v\n%s", set, err, stderr)
	}
	return objects(t, out)
}

// dataNetwork is the rendered DataNetwork, decoded into the API's type, or nil.
func dataNetwork(t *testing.T, objs []*unstructured.Unstructured) *fsv1.DataNetwork {
	t.Helper()
	dn := find(objs, "DataNetwork")
	if len(dn) == 0 {
		return nil
	}
	if len(dn) > 1 {
		t.Fatalf("%d DataNetworks, want one", len(dn))
	}
	var out fsv1.DataNetwork
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(dn[0].Object, &out, true); err != nil {
		t.Fatalf("the DataNetwork is not the API's: %v", err)
	}
	return &out
}

// installerNodeConf is the node config the CNI installer writes, decoded strictly.
func installerNodeConf(t *testing.T, objs []*unstructured.Unstructured) nodeConf {
	t.Helper()
	conf, ok := maybeNodeConf(t, objs)
	if !ok {
		t.Fatal("the installer has no --node-config-data")
	}
	return conf
}

// maybeNodeConf is installerNodeConf, and false when the chart writes no node config.
func maybeNodeConf(t *testing.T, objs []*unstructured.Unstructured) (nodeConf, bool) {
	t.Helper()
	ds := find(objs, "DaemonSet")
	if len(ds) != 1 {
		return nodeConf{}, false
	}
	containers, _, _ := unstructured.NestedSlice(ds[0].Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		c := c.(map[string]any)
		for _, a := range c["args"].([]any) {
			if v, ok := strings.CutPrefix(a.(string), "--node-config-data="); ok && c["name"] == "installer" {
				dec := json.NewDecoder(strings.NewReader(v))
				dec.DisallowUnknownFields()
				var conf nodeConf
				if err := dec.Decode(&conf); err != nil {
					t.Fatalf("--node-config-data %s: %v", v, err)
				}
				return conf, true
			}
		}
	}
	return nodeConf{}, false
}

// The chart renders the data network once: the DataNetwork object (after its CRD, as a
// post-install and post-upgrade hook) and every node's copy in fstack-cni's node config are the
// same plan (the API's own DataNetwork.Plan() of the object is the node's network, which
// netplan parses), the node's default is the network, and the operator defaults ports to it.
func TestDataNetworkObjectAndNodeCopyAgree(t *testing.T) {
	for name, set := range map[string][]string{
		"defaults": {"cni.nodeConfig.namespaces={web}"},
		"everything set": {"dataNetwork.name=tenants", "dataNetwork.subnets={10.60.0.0/24,fd00:60::/64}", "dataNetwork.gateways={10.60.0.1,fd00:60::1}",
			"dataNetwork.reserved={10.60.0.250-10.60.0.254}", "dataNetwork.vlans={100,200}", "dataNetwork.mac.policy=Prefix",
			"dataNetwork.mac.prefix=02:5a:00", "dataNetwork.nodeSelector.fstack=yes",
			"dataNetwork.grants[0].namespaces={web}", "dataNetwork.grants[0].ranges={10.60.0.10-10.60.0.19}",
			"dataNetwork.grants[1].namespaceSelector.matchLabels.team=b", "dataNetwork.grants[1].ranges={10.60.0.64/26,fd00:60::100-fd00:60::1ff}"},
	} {
		t.Run(name, func(t *testing.T) {
			objs := renderSet(t, set...)
			dn := dataNetwork(t, objs)
			if dn == nil {
				t.Fatal("no DataNetwork")
			}
			ann := dn.GetAnnotations()
			if ann["helm.sh/hook"] != "post-install,post-upgrade" || ann["helm.sh/hook-delete-policy"] != "before-hook-creation" {
				t.Errorf("annotations %v: the DataNetwork must be made after its CRD", ann)
			}
			node := installerNodeConf(t, objs)
			if len(node.Networks) != 1 || !reflect.DeepEqual(node.Networks[0], dn.Plan()) {
				t.Fatalf("the node's networks %+v are not the object's plan %+v", node.Networks, dn.Plan())
			}
			if _, err := netplan.Parse(node.Networks[0]); err != nil {
				t.Errorf("fstack-cni would refuse the node's copy: %v", err)
			}
			if node.DefaultNetwork != dn.Name {
				t.Errorf("the node's defaultNetwork is %q, the network %q", node.DefaultNetwork, dn.Name)
			}
			if flag := operatorFlags(t, find(objs, "Deployment")[0])["--default-data-network"]; flag != dn.Name {
				t.Errorf("--default-data-network=%q, the network is %q", flag, dn.Name)
			}
		})
	}
	for _, set := range valueSets(t) {
		objs := objects(t, render(t, set))
		if node, ok := maybeNodeConf(t, objs); ok && len(node.Networks) == 1 && dataNetwork(t, objs) != nil {
			if !reflect.DeepEqual(node.Networks[0], dataNetwork(t, objs).Plan()) {
				t.Errorf("%s: the node's network %+v is not the object's plan %+v", set, node.Networks[0], dataNetwork(t, objs).Plan())
			}
		} else if set != "multus-ha" {
			t.Errorf("%s: no DataNetwork, or no node copy of it", set)
		}
	}
}

// With no grants, the network grants its subnets to the namespaces the release serves (those
// fstack-cni serves and those it gives a NetworkAttachmentDefinition, each once), so a release
// upgraded from before DataNetworks keeps serving them; with none listed, no namespace.
func TestDataNetworkDefaultGrant(t *testing.T) {
	objs := renderSet(t, "cni.nodeConfig.namespaces={web,db}", "networkAttachmentDefinition.namespaces={db,shop}", "dataNetwork.subnets={10.56.0.0/24,fd00:56::/64}")
	want := []fsv1.AddressGrant{{Namespaces: []string{"web", "db", "shop"}, Ranges: []string{"10.56.0.0/24", "fd00:56::/64"}}}
	if got := dataNetwork(t, objs).Spec.Grants; !reflect.DeepEqual(got, want) {
		t.Errorf("grants %+v, want %+v", got, want)
	}
	if got := dataNetwork(t, renderSet(t)).Spec.Grants; got != nil {
		t.Errorf("a release serving no namespace grants %+v", got)
	}
	given := dataNetwork(t, renderSet(t, "cni.nodeConfig.namespaces={web}", "dataNetwork.grants[0].namespaces={db}", "dataNetwork.grants[0].ranges={10.56.0.10}"))
	if want := []fsv1.AddressGrant{{Namespaces: []string{"db"}, Ranges: []string{"10.56.0.10"}}}; !reflect.DeepEqual(given.Spec.Grants, want) {
		t.Errorf("given grants rendered as %+v", given.Spec.Grants)
	}
}

// create: false leaves the object to the platform; the node config and the operator keep the
// network.
func TestDataNetworkNotCreated(t *testing.T) {
	objs := renderSet(t, "dataNetwork.create=false", "dataNetwork.name=platform-net")
	if dn := dataNetwork(t, objs); dn != nil {
		t.Errorf("a DataNetwork with create: false: %s", dn.Name)
	}
	if node := installerNodeConf(t, objs); node.DefaultNetwork != "platform-net" || len(node.Networks) != 1 {
		t.Errorf("node config %+v", node)
	}
}

// What the network cannot be is refused at install, naming the value and the fix: a
// NetworkAttachmentDefinition on another subnet or router (the chart derives nothing from it), a
// MAC prefix without policy Prefix, and, by the schema, a Prefix policy without a prefix, a VLAN
// id out of range, a name that is no DataNetwork's, a grant that names no namespace.
func TestDataNetworkRefused(t *testing.T) {
	nad := []string{"networkAttachmentDefinition.enabled=true", "networkAttachmentDefinition.namespaces={web}"}
	for _, c := range []struct {
		set  []string
		want string
	}{
		{append(nad, "networkAttachmentDefinition.config.ipam.subnet=10.77.0.0/24"),
			"networkAttachmentDefinition.config.ipam.subnet 10.77.0.0/24 is not one of dataNetwork.subnets [10.56.0.0/24]"},
		{append(nad, "networkAttachmentDefinition.config.ipam.gateway=10.56.0.254"),
			"networkAttachmentDefinition.config.ipam.gateway 10.56.0.254 is not one of dataNetwork.gateways [10.56.0.1]"},
		{[]string{"dataNetwork.mac.prefix=02:5a"}, "dataNetwork.mac.prefix is \"02:5a\" but dataNetwork.mac.policy is Derived"},
	} {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		if _, stderr, err := helm(t, args...); err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("--set %v: want refused with %q, got %v\n%s", c.set, c.want, err, stderr)
		}
	}
	for _, c := range []struct{ set, want []string }{
		{[]string{"dataNetwork.mac.policy=Prefix"}, []string{"dataNetwork", "prefix"}},
		{[]string{"dataNetwork.vlans={4095}"}, []string{"dataNetwork", "vlans"}},
		{[]string{"dataNetwork.name=Data_Net"}, []string{"dataNetwork", "name"}},
		{[]string{"dataNetwork.grants[0].ranges={10.56.0.10}"}, []string{"dataNetwork", "grants"}},
		{[]string{"dataNetwork.subnets=null"}, []string{"dataNetwork", "subnets"}},
	} {
		schemaRefuses(t, c.set, c.want, "--kube-version", kubeVersion)
	}
}

// The local cluster's chart values give the DataNetwork lib.sh gives fstack-cni in the node
// config up.sh writes: its name, subnet, router (the node's address on br-fstack) and the subnet
// granted to the namespaces fstack-cni serves there; untagged, MACs derived.
func TestDataNetworkMatchesLocalCluster(t *testing.T) {
	lib := shellVars(t, filepath.Join(root, "hack", "cluster", "lib.sh"))
	out, stderr, err := helm(t, "template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
		"-f", filepath.Join(root, "hack", "cluster", "values.yaml"))
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	dn := dataNetwork(t, objects(t, out))
	nss := strings.Fields(shellString(t, filepath.Join(root, "hack", "cluster", "lib.sh"), "FSTACK_NAMESPACES"))
	want := netplan.Spec{Name: lib["FSTACK_NETWORK"], Subnets: []string{lib["FSTACK_SUBNET"]}, Gateways: []string{lib["FSTACK_GATEWAY"]},
		Grants: []netplan.Grant{{Namespaces: nss, Ranges: []string{lib["FSTACK_SUBNET"]}}}}
	if got := dn.Plan(); !reflect.DeepEqual(got, want) || len(nss) == 0 {
		t.Errorf("the local cluster's DataNetwork %+v, lib.sh's %+v", got, want)
	}
	if sender, _, _ := strings.Cut(lib["NODE_SENDER_ADDR"], "/"); sender != lib["FSTACK_GATEWAY"] {
		t.Errorf("the node's address on br-fstack %s is not the network's router %s", sender, lib["FSTACK_GATEWAY"])
	}
}

// shellString reads NAME="value" from a shell file.
func shellString(t *testing.T, path, name string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+"=\""); ok {
			return strings.TrimSuffix(v, "\"")
		}
	}
	return ""
}

// DataNetworks are the platform's: tenants may be bound to the viewer ClusterRole, which reads
// them, and no role the chart renders, with any of its value sets, writes them.
func TestDataNetworkWrittenByThePlatformOnly(t *testing.T) {
	read := []any{"get", "list", "watch"}
	for _, set := range valueSets(t) {
		objs := objects(t, render(t, set))
		viewer := false
		for _, o := range append(find(objs, "ClusterRole"), find(objs, "Role")...) {
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				r := r.(map[string]any)
				if !touches(r, "kubefstack.io", "datanetworks") {
					continue
				}
				verbs, _ := r["verbs"].([]any)
				for _, v := range verbs {
					if !slices.Contains(read, v) {
						t.Errorf("%s: %s %s may %v datanetworks", set, o.GetKind(), o.GetName(), v)
					}
				}
				if o.GetName() == release+"-datanetwork-viewer" && reflect.DeepEqual(verbs, read) {
					viewer = true
				}
			}
		}
		if !viewer {
			t.Errorf("%s: no ClusterRole %s-datanetwork-viewer reading datanetworks", set, release)
		}
	}
}

// touches says whether rule r names resource of group, or any by a wildcard.
func touches(r map[string]any, group, resource string) bool {
	has := func(key, want string) bool {
		list, _ := r[key].([]any)
		return slices.Contains(list, any(want)) || slices.Contains(list, any("*"))
	}
	return has("apiGroups", group) && has("resources", resource)
}
