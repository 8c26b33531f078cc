package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// refusal asserts ADD failed with code 7 and a message naming every want.
func refusal(t *testing.T, err error, want ...string) {
	t.Helper()
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig {
		t.Fatalf("ADD: %v, want a code %d error", err, types.ErrInvalidNetworkConfig)
	}
	for _, w := range want {
		if !strings.Contains(te.Msg, w) {
			t.Errorf("message %q lacks %q", te.Msg, w)
		}
	}
}

// ADD holds the addresses a pod's networks entry (runtimeConfig.ips) or annotation gives to the
// network's subnets and refuses any address that is a gateway of it, before anything is taken:
// no port, no files, no lease.
func TestAddRefusesAddressesOutsideTheNetwork(t *testing.T) {
	for _, tc := range outsideTheNetwork() {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeOVSDB(t, nil)
			n := newNode(t, f.path, tc.over)
			_, _, err := n.add()
			refusal(t, err, tc.want...)
			for _, txn := range f.recorded() {
				if strings.Contains(fmt.Sprint(txn), "insert") {
					t.Errorf("a port was inserted: %v", txn)
				}
			}
			n.assertNoFiles()
			if a, d := n.ipam.counts(); a != d {
				t.Errorf("IPAM ADD %d, DEL %d: a lease is left", a, d)
			}
		})
	}
}

type refusalCase struct {
	name string
	over map[string]any
	want []string
}

// outsideTheNetwork are network configs ADD refuses, and what each refusal names.
func outsideTheNetwork() []refusalCase {
	ipam := map[string]any{"type": "fake", "subnet": "10.9.0.0/24", "gateway": "10.9.0.1"}
	// As a pod writes it: not through the codec, which refuses to write a bad value.
	type podWritten podcontract.PortBinding
	annotation := func(b podcontract.PortBinding) map[string]any {
		v, _ := json.Marshal(map[string]podWritten{"net1": podWritten(b)})
		return map[string]any{podcontract.PodAnnotationsCapability: map[string]string{podcontract.BindingAnnotation: string(v)}}
	}
	return []refusalCase{
		{"static address outside the subnet", map[string]any{"ipam": ipam, "runtimeConfig": map[string]any{"ips": []string{"10.8.0.5/24"}}},
			[]string{"runtimeConfig.ips", "10.8.0.5", "outside", "10.9.0.0/24"}},
		{"static address outside the ranges", map[string]any{"ipam": map[string]any{"type": "fake", "ranges": [][]map[string]string{{{"subnet": "10.7.0.0/24"}}}},
			"runtimeConfig": map[string]any{"ips": []string{"10.9.0.5/24"}}}, []string{"runtimeConfig.ips", "10.9.0.5", "10.7.0.0/24"}},
		{"static address that is the gateway", map[string]any{"ipam": ipam, "runtimeConfig": map[string]any{"ips": []string{"10.9.0.1/24"}}},
			[]string{"runtimeConfig.ips", "10.9.0.1", "gateway"}},
		{"VIP that is the gateway", map[string]any{"ipam": ipam, "args": map[string]any{"cni": map[string]any{podcontract.CNIArgsBinding: podcontract.PortBinding{Sources: []string{"10.9.0.1"}}}}},
			[]string{"args.cni." + podcontract.CNIArgsBinding + ".sources", "10.9.0.1", "gateway"}},
		{"annotated address outside the subnet", map[string]any{"ipam": ipam, "runtimeConfig": annotation(podcontract.PortBinding{IPs: []string{"192.168.0.9/24"}})},
			[]string{"annotation " + podcontract.BindingAnnotation + "[net1].ips", "192.168.0.9", "outside"}},
		{"annotated VLAN out of range", map[string]any{"ipam": ipam, "runtimeConfig": annotation(podcontract.PortBinding{VLANs: []int{4095}})},
			[]string{"vlans", "4095"}},
		{"malformed annotation", map[string]any{"ipam": ipam, "runtimeConfig": map[string]any{podcontract.PodAnnotationsCapability: map[string]string{podcontract.BindingAnnotation: "{"}}},
			[]string{podcontract.BindingAnnotation, "the injector writes it"}},
		{"annotation naming a member twice", map[string]any{"ipam": ipam, "runtimeConfig": map[string]any{podcontract.PodAnnotationsCapability: map[string]string{
			podcontract.BindingAnnotation: `{"net1":{"sources":["10.9.0.50"],"sources":["10.9.0.1"]}}`}}}, []string{podcontract.BindingAnnotation, "given twice"}},
		{"networks entry with an unknown member", map[string]any{"ipam": ipam, "args": map[string]any{"cni": map[string]any{podcontract.CNIArgsBinding: map[string]any{"vips": []string{"10.9.0.50"}}}}},
			[]string{"args.cni." + podcontract.CNIArgsBinding, `unknown member "vips"`}},
		{"malformed subnet", map[string]any{"ipam": map[string]any{"type": "fake", "subnet": "10.9.0.0"}}, []string{"ipam.subnet", "not a CIDR"}},
	}
}

// The port records what its rules bind: its address (IPAM's or static), the VIPs and VLAN
// addresses and ids the pod's networks entry (args.cni) or annotation gives, each address also
// under a key of its own that the next ADD's transaction waits on; and the rules it is guarded
// with are those.
func TestAddBindsThePortToItsAddressesAndRecordsThem(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	b, _ := json.Marshal(map[string]podcontract.PortBinding{"net1": {IPs: []string{"10.9.0.7/24"}, Sources: []string{"10.100.0.7"}, VLANs: []int{100}}})
	n := newNode(t, f.path, map[string]any{"ipam": map[string]any{"type": "fake", "subnet": "10.9.0.0/24", "gateway": "10.9.0.1"},
		"args":          map[string]any{"cni": map[string]any{podcontract.CNIArgsBinding: podcontract.PortBinding{Sources: []string{"10.9.0.50", "2001:db8::50"}, VLANs: []int{200, 100}}}},
		"runtimeConfig": map[string]any{podcontract.PodAnnotationsCapability: map[string]string{podcontract.BindingAnnotation: string(b), "other": "x"}}})
	_, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	ids := fmt.Sprint(f.txn(1)[slices.Index(insertTxn, "insert Interface")]["row"].(map[string]any)["external_ids"])
	for _, want := range []string{
		antispoof.ExternalIDAddrs + " 10.9.0.5,10.9.0.7,10.9.0.50,2001:db8::50,10.100.0.7",
		antispoof.ExternalIDVLANs + " 100,200",
		antispoof.ExternalIDMAC + " " + a.MAC,
		idHolds + "10.9.0.5 true", idHolds + "2001:db8::50 true", idHolds + "10.100.0.7 true",
	} {
		if !strings.Contains(ids, want) {
			t.Errorf("external_ids %s lack %q", ids, want)
		}
	}
	waits := f.txn(1)[claimWaitIndex:]
	if len(waits) != 6 { // the MAC and five addresses
		t.Errorf("%d claim waits, want 6: %v", len(waits), waits)
	}
	for _, w := range waits {
		if w["op"] != "wait" || !strings.Contains(fmt.Sprint(w["where"]), "excludes") || !strings.Contains(fmt.Sprint(w["where"]), "u1") {
			t.Errorf("claim wait %v does not leave out the pod's own ports", w)
		}
	}
	if len(a.Binding.Addrs) != 5 || len(a.Binding.VLANs) != 2 {
		t.Errorf("the guard binds %+v", a.Binding)
	}
}

// A MAC or address another pod's port on the node holds makes the port's transaction fail at
// its wait; ADD then names the field, the holder and the fix, and takes everything back.
func TestAddRefusesWhatAnotherPodHolds(t *testing.T) {
	holder := func(ids map[string]string) func(int, []map[string]any) fakeReply {
		return func(n int, ops []map[string]any) fakeReply {
			res := defaultResults(ops)
			switch {
			case n == 1:
				res[claimWaitIndex] = map[string]any{"error": "timed out", "details": "wait"}
				return fakeReply{results: res[:claimWaitIndex+1]}
			case len(ops) == 1 && ops[0]["op"] == "select" && ops[0]["table"] == "Interface" && fmt.Sprint(ops[0]["columns"]) == "[name external_ids]":
				m := []any{}
				for k, v := range ids {
					m = append(m, []any{k, v})
				}
				res[0] = map[string]any{"rows": []any{map[string]any{"name": "fskother000001", "external_ids": []any{"map", m}}}}
			}
			return fakeReply{results: res}
		}
	}
	other := map[string]string{podcontract.OVSIDOwner: pluginType, podcontract.OVSIDPodUID: "u2", podcontract.OVSIDPodNamespace: "ns2", podcontract.OVSIDPodName: "db-0", podcontract.OVSIDNetwork: "fstack", podcontract.OVSIDIfName: "net1"}
	t.Run("MAC", func(t *testing.T) {
		ids := map[string]string{podcontract.OVSIDMAC: "02:00:00:00:00:aa"}
		for k, v := range other {
			ids[k] = v
		}
		f := newFakeOVSDB(t, holder(ids))
		n := newNode(t, f.path, map[string]any{"runtimeConfig": map[string]any{"mac": "02:00:00:00:00:AA"}})
		_, _, err := n.add()
		refusal(t, err, "runtimeConfig.mac", "02:00:00:00:00:AA", "fskother000001", "ns2/db-0", "vhostUser.mac")
		n.assertNoFiles()
		n.assertIPAM(1, 1)
	})
	t.Run("address", func(t *testing.T) {
		ids := map[string]string{podcontract.OVSIDMAC: "02:00:00:00:00:bb", idHolds + "10.9.0.5": idHeld}
		for k, v := range other {
			ids[k] = v
		}
		f := newFakeOVSDB(t, holder(ids))
		n := newNode(t, f.path, nil)
		_, _, err := n.add()
		refusal(t, err, "IPAM result", "10.9.0.5", "fskother000001", "ns2/db-0", "another address")
		n.assertNoFiles()
		n.assertIPAM(1, 1)
		if !strings.Contains(fmt.Sprint(f.recorded()), "mutate Bridge") {
			t.Errorf("the rollback did not look for the port to remove: %v", f.recorded())
		}
	})
}
