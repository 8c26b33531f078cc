package node

import (
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The router takeover of issue 38 against real OVS-DPDK: a tenant's network config whose IPAM
// section names another gateway (host-local would default to the subnet's first address), and
// a binding (a Multus networks entry's cni-args, which the pod
// writes) with the router's address 10.99.0.1 as a VIP. On a node that enforces no network
// plan the port is made with rules that let it answer ARP for the router (the control); on a
// node whose config carries the DataNetwork, ADD refuses it, and leaves no port, no rule, no
// pod link, no file in the pod's emptyDir and no lease.
func TestRouterTakeoverIsRefusedByTheNodesPlan(t *testing.T) {
	takeover := func(n *netw) {
		n.extra = map[string]any{
			"ipam": map[string]any{"type": "host-local", "subnet": "10.99.0.0/24", "gateway": "10.99.0.254", "dataDir": n.ipamDir()},
			"args": map[string]any{"cni": map[string]any{podcontract.CNIArgsBinding: podcontract.PortBinding{Sources: []string{"10.99.0.1"}}}},
		}
	}
	t.Run("control: no plan, the router's address is bound", func(t *testing.T) {
		n, p := newNet(t, "1.1.0"), newPod(1301)
		takeover(n)
		n.mustAdd(p)
		flows := dumpFlows(t)
		n.mustDel(p)
		n.assertNothingLeft()
		assertNoGuardRules(t)
		if !strings.Contains(flows, "arp_spa=10.99.0.1,") && !strings.Contains(flows, "arp_spa=10.99.0.1 ") {
			t.Fatalf("without a plan the port was not bound to the router's address, so the refusal below proves nothing:\n%s", flows)
		}
	})
	n, p := newNet(t, "1.1.0"), newPod(1302)
	takeover(n)
	n.plan = localNetwork()
	_, err := n.add(p)
	if err == nil || !strings.Contains(err.Error(), "10.99.0.1 is a gateway of DataNetwork fstack-data") {
		t.Fatalf("ADD: %v, want the takeover refused naming the router and the network", err)
	}
	n.assertNothingLeft()
	assertNoGuardRules(t)
	if left := entries(n.podVolume(p)); len(left) != 0 {
		t.Errorf("left in the pod's emptyDir: %v", left)
	}
	if err := n.del(p); err != nil {
		t.Errorf("DEL after the refused ADD: %v", err)
	}
}
