package plugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/internal/netplan"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// testNetwork is the platform's network of the plan tests, as the node config gives it: the
// fake IPAM's subnet 10.9.0.0/24 and router 10.9.0.1; namespace ns (the test pod's) holds
// 10.9.0.2-99, namespace other 10.9.0.100-199, and any namespace a selector picks 10.9.0.200-
// 209 (fstack-cni reads no labels); VLAN 100; MACs within 02:5a:00.
func testNetwork() netplan.Spec {
	return netplan.Spec{Name: "fstack-data", Subnets: []string{"10.9.0.0/24"}, Gateways: []string{"10.9.0.1"},
		Reserved: []string{"10.9.0.250-10.9.0.254"}, VLANs: []int{100}, MACPrefix: "02:5a:00",
		Grants: []netplan.Grant{{Namespaces: []string{"ns"}, Ranges: []string{"10.9.0.2-10.9.0.99"}},
			{Namespaces: []string{"other"}, Ranges: []string{"10.9.0.100-10.9.0.199"}},
			{BySelector: true, Ranges: []string{"10.9.0.200-10.9.0.209"}}}}
}

// setNetworks gives the node's config the networks and default network.
func (n *node) setNetworks(def string, nets ...netplan.Spec) {
	n.t.Helper()
	data, err := os.ReadFile(n.p.NodeConfig)
	if err != nil {
		n.t.Fatal(err)
	}
	c, err := nodeconf.Parse(data)
	if err != nil {
		n.t.Fatal(err)
	}
	c.Networks, c.DefaultNetwork = nets, def
	writeNodeConf(n.t, filepath.Dir(filepath.Dir(n.p.NodeConfig)), c)
}

// planNode is a node whose config lists testNetwork as its default, and whose network config is
// what a tenant would write to take the router: an IPAM section naming no gateway (so its
// result names none either), and nothing but the node's plan knows 10.9.0.1 is one.
func planNode(t *testing.T, over map[string]any) (*node, *fakeOVSDB) {
	t.Helper()
	f := newFakeOVSDB(t, nil)
	conf := map[string]any{"ipam": map[string]any{"type": "fake", "subnet": "10.9.0.0/24"}}
	for k, v := range over {
		conf[k] = v
	}
	n := newNode(t, f.path, conf)
	n.ipam.noGateway = true
	n.setNetworks("fstack-data", testNetwork())
	return n, f
}

func withBinding(b podcontract.PortBinding) map[string]any {
	return map[string]any{"args": map[string]any{"cni": map[string]any{podcontract.CNIArgsBinding: b}}}
}

func withStaticIPs(ips ...string) map[string]any {
	return map[string]any{"runtimeConfig": map[string]any{"ips": ips}}
}

// ADD holds the port to its DataNetwork as the node config gives it, whatever the pod and its
// network config say, and a refusal leaves nothing behind: no port inserted, no files, no lease.
// Without the plan (the last case's control) the same router takeover is bound.
func TestAddHoldsThePortToItsNetworksPlan(t *testing.T) {
	for _, tc := range []refusalCase{
		{"router takeover: the gateway as a VIP", withBinding(podcontract.PortBinding{Sources: []string{"10.9.0.1"}}),
			[]string{"args.cni." + podcontract.CNIArgsBinding + ".sources", "10.9.0.1 is a gateway of DataNetwork fstack-data", "pod namespace ns"}},
		{"router takeover: the gateway as the port's address", withStaticIPs("10.9.0.1/24"),
			[]string{"runtimeConfig.ips", "10.9.0.1 is a gateway of DataNetwork fstack-data"}},
		{"an address of another namespace's grant", withStaticIPs("10.9.0.150/24"),
			[]string{"runtimeConfig.ips", "10.9.0.150 is not granted to this namespace", "10.9.0.2-10.9.0.99"}},
		{"a VIP of another namespace's grant", withBinding(podcontract.PortBinding{Sources: []string{"10.9.0.120"}}),
			[]string{".sources", "10.9.0.120 is not granted"}},
		{"a reserved VIP", withBinding(podcontract.PortBinding{Sources: []string{"10.9.0.251"}}),
			[]string{".sources", "10.9.0.251 is reserved on DataNetwork fstack-data"}},
		{"an address of the subnet with another prefix length", withStaticIPs("10.9.0.5/16"),
			[]string{"runtimeConfig.ips", "prefix length 16"}},
		{"a VLAN the network does not carry", withBinding(podcontract.PortBinding{VLANs: []int{100, 200}}),
			[]string{".vlans", "does not carry VLAN 200", "it carries 100"}},
		{"a MAC outside the prefix (Multus's mac)", map[string]any{"runtimeConfig": map[string]any{"mac": "02:11:00:00:00:01"}},
			[]string{"runtimeConfig.mac", "02:11:00:00:00:01 does not begin with DataNetwork fstack-data's MAC prefix 02:5a:00"}},
		{"a MAC outside the prefix (the network config's)", map[string]any{"mac": "02:11:00:00:00:01"},
			[]string{"mac", "does not begin with"}},
		{"a network the node does not carry", withBinding(podcontract.PortBinding{Network: "elsewhere"}),
			[]string{".network", `DataNetwork "elsewhere" is not one this node carries`, "fstack-data", "spec.ports[].dataNetwork"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, f := planNode(t, tc.over)
			_, _, err := n.add()
			refusal(t, err, tc.want...)
			assertNothingTaken(t, n, f)
		})
	}
	t.Run("control: no plan on the node", func(t *testing.T) {
		n, _ := planNode(t, withBinding(podcontract.PortBinding{Sources: []string{"10.9.0.1"}}))
		n.setNetworks("")
		if _, _, err := n.add(); err != nil {
			t.Fatalf("without a plan the takeover is bound (the network config names no gateway), so the cases above test the plan: %v", err)
		}
	})
}

// assertNothingTaken fails when the refused ADD inserted a port, left a file or kept a lease.
func assertNothingTaken(t *testing.T, n *node, f *fakeOVSDB) {
	t.Helper()
	for _, txn := range f.recorded() {
		if strings.Contains(fmt.Sprint(txn), "insert") {
			t.Errorf("a port was inserted: %v", txn)
		}
	}
	n.assertNoFiles()
	if a, d := n.ipam.counts(); a != d {
		t.Errorf("IPAM ADD %d, DEL %d: a lease is left", a, d)
	}
	if guarded, _ := n.flows.state(); len(guarded) != 0 {
		t.Errorf("rules left: %v", guarded)
	}
}

// A port within what its network grants its namespace is bound: its IPAM lease, its static
// address, VIPs of its grant and of a selector grant, the network's VLAN, a MAC within the
// prefix; and on a network whose MACs are derived, the MAC fstack-cni derives.
func TestAddBindsWhatTheNetworkGrants(t *testing.T) {
	n, _ := planNode(t, map[string]any{
		"args": map[string]any{"cni": map[string]any{podcontract.CNIArgsBinding: podcontract.PortBinding{
			Sources: []string{"10.9.0.50", "10.9.0.205"}, VLANs: []int{100}, Network: "fstack-data"}}},
		"runtimeConfig": map[string]any{"mac": "02:5a:00:00:00:07"}})
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%v %v %s", a.Binding.Addrs, a.Binding.VLANs, a.Binding.MAC); got != "[10.9.0.5 10.9.0.50 10.9.0.205] [100] 02:5a:00:00:00:07" {
		t.Errorf("bound %s", got)
	}

	derived := testNetwork()
	derived.MACPrefix = ""
	n, _ = planNode(t, withStaticIPs("10.9.0.7/24"))
	n.setNetworks("fstack-data", derived)
	if _, a, err = n.add(); err != nil || a.MAC != stableMAC("u1", "net1") {
		t.Fatalf("a port with the derived MAC on a Derived network: MAC %s, %v", a.MAC, err)
	}
	n, f := planNode(t, map[string]any{"runtimeConfig": map[string]any{"mac": "02:5a:00:00:00:07"}})
	n.setNetworks("fstack-data", derived)
	_, _, err = n.add()
	refusal(t, err, "runtimeConfig.mac", "DataNetwork fstack-data derives every port's MAC")
	assertNothingTaken(t, n, f)
}

// The port's network is its binding's, else the node's default; with neither ADD refuses,
// naming the networks the node has and the fix. Two carriers naming two networks are refused.
func TestAddFindsThePortsNetwork(t *testing.T) {
	other := testNetwork()
	other.Name, other.Grants = "tenant-b", []netplan.Grant{{Namespaces: []string{"ns"}, Ranges: []string{"10.9.0.0/24"}}}

	n, _ := planNode(t, withStaticIPs("10.9.0.150/24"))
	n.setNetworks("fstack-data", testNetwork(), other)
	if _, _, err := n.add(); err == nil {
		t.Fatal("the default network's plan did not hold the port")
	}
	n, _ = planNode(t, mergeConf(withStaticIPs("10.9.0.150/24"), withBinding(podcontract.PortBinding{Network: "tenant-b"})))
	n.setNetworks("fstack-data", testNetwork(), other)
	if _, _, err := n.add(); err != nil {
		t.Fatalf("the binding's network tenant-b grants ns 10.9.0.150: %v", err)
	}

	n, f := planNode(t, nil)
	n.setNetworks("", testNetwork(), other)
	_, _, err := n.add()
	refusal(t, err, "names no DataNetwork", "no defaultNetwork", "fstack-data, tenant-b", "dataNetwork")
	assertNothingTaken(t, n, f)

	ann, _ := json.Marshal(map[string]podcontract.PortBinding{"net1": {Network: "fstack-data"}})
	n, f = planNode(t, mergeConf(withBinding(podcontract.PortBinding{Network: "tenant-b"}),
		map[string]any{"runtimeConfig": map[string]any{podcontract.PodAnnotationsCapability: map[string]string{podcontract.BindingAnnotation: string(ann)}}}))
	n.setNetworks("fstack-data", testNetwork(), other)
	_, _, err = n.add()
	refusal(t, err, `network is "fstack-data" but args.cni.`+podcontract.CNIArgsBinding+`.network is "tenant-b"`)
	assertNothingTaken(t, n, f)
}

func mergeConf(confs ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, c := range confs {
		for k, v := range c {
			out[k] = v
		}
	}
	return out
}

// A node config that lists no network enforces none: ADD binds as before, and says so in the
// log, once.
func TestAddWarnsWhenTheNodeHasNoPlan(t *testing.T) {
	n, _ := planNode(t, nil)
	n.setNetworks("")
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(n.logFile())
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(string(log), "this node enforces no network plan"); c != 1 {
		t.Errorf("the warning is in the log %d times, want once:\n%s", c, log)
	}
	n, _ = planNode(t, nil)
	if _, _, err := n.add(); err != nil {
		t.Fatal(err)
	}
	if log, _ := os.ReadFile(n.logFile()); strings.Contains(string(log), "no network plan") {
		t.Errorf("a node with a plan warned:\n%s", log)
	}
}
