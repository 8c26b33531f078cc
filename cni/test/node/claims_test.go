package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// Issue 31 §2: on the Multus path the pod's networks entry chooses the MAC and addresses. ADD
// refuses, against the real ovsdb-server (whose transaction waits do the check), a MAC or an
// address that another pod's live port on the node holds, naming the field and the holder, and
// leaves nothing of the refused attachment; a new sandbox of the same pod (same pod UID) is not
// "another pod"; and an address outside the network's subnet is refused before anything is taken.
func TestAddRefusesAnotherPodsMACOrAddress(t *testing.T) {
	n := staticNet{newNet(t, "1.1.0")}
	n.extra = map[string]any{"capabilities": map[string]any{"ips": true, "mac": true}}
	holder := newPod(1200)
	if err := n.add(holder, "02:fe:00:00:12:00", "10.99.0.120/24"); err != nil {
		t.Fatalf("ADD of the holder: %v", err)
	}
	t.Cleanup(func() { n.del(t, holder, "02:fe:00:00:12:00", "10.99.0.120/24"); n.assertNothingLeft() })
	holderPort := ports(t)[0]

	refused := func(name string, p pod, mac, ip string, want ...string) {
		t.Run(name, func(t *testing.T) { n.assertRefused(t, holderPort, p, mac, ip, want...) })
	}
	refused("same MAC", newPod(1201), "02:FE:00:00:12:00", "10.99.0.121/24", "runtimeConfig.mac", holderPort, "default/web-0", "vhostUser.mac")
	refused("same address", newPod(1202), "02:fe:00:00:12:02", "10.99.0.120/24", "runtimeConfig.ips", "10.99.0.120", holderPort, "another address")
	refused("outside the subnet", newPod(1203), "02:fe:00:00:12:03", "10.98.0.5/24", "runtimeConfig.ips", "10.98.0.5", "10.99.0.0/24")
	refused("the gateway", newPod(1204), "02:fe:00:00:12:04", "10.99.0.1/24", "10.99.0.1", "gateway")

	t.Run("a new sandbox of the same pod", func(t *testing.T) {
		again := holder
		again.containerID = strings.Replace(holder.containerID, "c0ffee", "beef00", 1)
		if err := n.add(again, "02:fe:00:00:12:00", "10.99.0.120/24"); err != nil {
			t.Fatalf("ADD of the pod's new sandbox: %v", err)
		}
		n.del(t, again, "02:fe:00:00:12:00", "10.99.0.120/24")
	})
}

// staticNet attaches pods with the MAC and address of their networks entry, as Multus passes
// them (the ips and mac capabilities).
type staticNet struct{ *netw }

func (n staticNet) add(p pod, mac, ip string) error {
	rt := p.rt()
	rt.CapabilityArgs = map[string]any{"ips": []string{ip}, "mac": mac}
	n.kubeletMounts(p)
	_, err := n.cni().AddNetworkList(context.Background(), n.confList(), rt)
	return err
}

func (n staticNet) del(t *testing.T, p pod, mac, ip string) {
	t.Helper()
	rt := p.rt()
	rt.CapabilityArgs = map[string]any{"ips": []string{ip}, "mac": mac}
	if err := n.cni().DelNetworkList(context.Background(), n.confList(), rt); err != nil {
		t.Errorf("DEL: %v", err)
	}
}

// assertRefused asserts that p's ADD with mac and ip is refused with code 7 and a message
// naming every want, leaving nothing but the holder's port and files, and that its DEL, as a
// runtime runs it after a failed ADD, does not touch the holder.
func (n staticNet) assertRefused(t *testing.T, holderPort string, p pod, mac, ip string, want ...string) {
	t.Helper()
	err := n.add(p, mac, ip)
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig {
		t.Fatalf("ADD: %v, want refused with code 7", err)
	}
	for _, w := range want {
		if !strings.Contains(te.Msg, w) {
			t.Errorf("message %q lacks %q", te.Msg, w)
		}
	}
	if got := ports(t); len(got) != 1 || got[0] != holderPort {
		t.Errorf("ports after the refused ADD: %v, want the holder's %s alone", got, holderPort)
	}
	if _, err := os.Lstat(filepath.Join(n.socketRoot(), p.uid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused pod's link is left: %v", err)
	}
	if d := entries(n.deviceInfoDir()); len(d) != 1 {
		t.Errorf("device-info files: %v, want the holder's alone", d)
	}
	n.del(t, p, mac, ip) // what a runtime does after a failed ADD: must not touch the holder
	if got := ports(t); len(got) != 1 {
		t.Errorf("ports after the refused pod's DEL: %v", got)
	}
}
