package node

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A networks entry with ips and mac, as the injector writes it for a port with a static
// address, reaches fstack-cni the way Multus sends it: libcni's capability args (Multus's
// runtime config of the delegate), injected as runtimeConfig because the network declares the
// ips and mac capabilities, as the chart's NetworkAttachmentDefinition does. The network has
// host-local IPAM: ADD must take no lease, the result (what Multus puts in network-status) and
// the device info (what the dataplane reads) must carry the static address and the one MAC, and
// CHECK and DEL must pass without a lease.
func TestStaticAddressTakesNoLeaseAndIsReported(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(500)
	n.extra = map[string]any{"capabilities": map[string]any{"ips": true, "mac": true}}
	rt := p.rt()
	rt.CapabilityArgs = map[string]any{"ips": []string{"10.99.0.10/24"}, "mac": "02:fe:00:00:00:01"}
	n.kubeletMounts(p)
	ctx := context.Background()
	r, err := n.cni().AddNetworkList(ctx, n.confList(), rt)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if leases := ipamLeases(n.ipamDir()); len(leases) != 0 {
		t.Errorf("ADD with a static address took IPAM leases: %v", leases)
	}
	if len(res.Interfaces) != 1 || res.Interfaces[0].Mac != "02:fe:00:00:00:01" {
		t.Errorf("result interfaces %+v, want MAC 02:fe:00:00:00:01", res.Interfaces)
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.99.0.10/24" || *res.IPs[0].Interface != 0 {
		t.Errorf("result IPs %+v, want 10.99.0.10/24 on the port", res.IPs)
	}
	info, err := podcontract.ReadDevInfo(filepath.Join(n.socketRoot(), p.uid, p.ifname+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(info.IPs, ",") != "10.99.0.10/24" || info.MAC != "02:fe:00:00:00:01" {
		t.Errorf("device info IPs %v MAC %s", info.IPs, info.MAC)
	}
	if err := n.cni().CheckNetworkList(ctx, n.confList(), rt); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := n.cni().DelNetworkList(ctx, n.confList(), rt); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	n.assertNothingLeft()
}
