package nodecheck

import (
	"context"
	"errors"
	"fmt"
	"strings"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// The switch checks: a netdev bridge is not yet a switch that carries a pod's packets. OVS must
// have brought DPDK up (else no vhost-user port opens), and the bridge needs an uplink that is up
// for anything beyond this node to reach a stack. Each decides vhost-user readiness, except that
// a bridge with no uplink at all only warns: pods on the node still reach each other's stacks
// (the local cluster's br-fstack is such a bridge but for the node's own veth), and a platform
// may want exactly that.

// isUplinkType says whether an Interface of this OVS type can carry traffic off the node: all
// but the pods' vhost-user ports and internal ports (the bridge's own port, whose other side is
// this node's kernel, not a wire). A system port (a NIC or a veth), dpdk, patch, tunnels (vxlan,
// geneve, gre, ...) and bond members are.
func isUplinkType(typ string) bool {
	switch typ {
	case "internal", "dpdkvhostuser", "dpdkvhostuserclient":
		return false
	}
	return true
}

// dpdkInit: ovs-vswitchd sets dpdk_initialized once DPDK's EAL came up, which needs the DPDK
// build of ovs-vswitchd started with other_config:dpdk-init=true (read only at its start).
func dpdkInit(facts *BridgeFacts) Check {
	c := Check{Name: "ovs-dpdk-init", Status: Pass, Label: fsv1.NodeLabelVhostUser}
	setting := "other_config:dpdk-init=" + facts.DPDKInit
	if facts.DPDKInit == "" {
		setting = "other_config:dpdk-init unset"
	}
	if facts.DPDKInitialized {
		c.Detail = "dpdk_initialized=true (" + setting + ")"
		return c
	}
	c.Status, c.Detail = Fail, "dpdk_initialized=false ("+setting+"): ovs-vswitchd has no DPDK, so no vhost-user port opens"
	c.Fix = "ovs-vsctl set Open_vSwitch . other_config:dpdk-init=true, then restart ovs-vswitchd (it reads dpdk-init only at start; " +
		"it must be the DPDK build, e.g. Debian's ovs-vswitchd-dpdk); if dpdk_initialized stays false, ovs-vswitchd's log " +
		"(ovs-vswitchd.log, its dpdk and EAL lines) says why: too few free hugepages for other_config:dpdk-socket-mem, a bad dpdk-extra"
	return c
}

// uplinkUp: an uplink carries traffic when its link is up and OVS reports no error on it (a
// patch port without its peer reads link_state up with an error).
func uplinkUp(u Uplink) bool { return u.LinkState == "up" && u.Error == "" }

// noUplink is the detail of a bridge with no uplink, in the words the issue and the docs use.
const noUplink = "no uplink: only pods on this node can reach the stack"

// uplink: pass when at least one uplink is up; warn when the bridge has none; fail when every
// uplink it has is down (it was meant to carry traffic and carries none).
func uplink(facts *BridgeFacts, bridge string) Check {
	c := Check{Name: "ovs-uplink", Status: Pass, Label: fsv1.NodeLabelVhostUser}
	if len(facts.Uplinks) == 0 {
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s (bridge %q has only vhost-user and internal ports)", noUplink, bridge)
		c.Fix = fmt.Sprintf("if clients beyond this node must reach the stacks, add an uplink to %s: a DPDK NIC "+
			"(ovs-vsctl add-port %s dpdk0 -- set Interface dpdk0 type=dpdk options:dpdk-devargs=<PCI address>), a kernel "+
			"interface, a patch port or a tunnel", bridge, bridge)
		return c
	}
	var up, down []string
	for _, u := range facts.Uplinks {
		if uplinkUp(u) {
			up = append(up, describeUplink(u))
		} else {
			down = append(down, describeUplink(u))
		}
	}
	var parts []string
	if len(up) > 0 {
		parts = append(parts, "up: "+strings.Join(up, ", "))
	}
	if len(down) > 0 {
		parts = append(parts, "down: "+strings.Join(down, ", "))
	}
	c.Detail = strings.Join(parts, "; ")
	if len(up) > 0 {
		return c
	}
	c.Status = Fail
	c.Detail = "no uplink is up, " + c.Detail + ": only pods on this node can reach the stack"
	c.Fix = fmt.Sprintf("bring an uplink up: ovs-vsctl list Interface <name> shows its link_state and error; a kernel "+
		"interface needs `ip link set <name> up` (and a cable or a peer that is up: link_state is the carrier); a dpdk "+
		"port needs a NIC bound to vfio-pci and the right options:dpdk-devargs; if admin_state is down, "+
		"ovs-ofctl mod-port %s <name> up", bridge)
	return c
}

// describeUplink is "name (type, link down, admin down: error)", naming only what is known.
func describeUplink(u Uplink) string {
	typ := u.Type
	if typ == "" {
		typ = "system"
	}
	var facts []string
	facts = append(facts, typ)
	if !uplinkUp(u) {
		state := u.LinkState
		if state == "" {
			state = "unreported"
		}
		facts = append(facts, "link "+state)
		if u.AdminState == "down" {
			facts = append(facts, "admin down")
		}
	}
	s := fmt.Sprintf("%s (%s)", u.Name, strings.Join(facts, ", "))
	if u.Error != "" {
		s = fmt.Sprintf("%s (%s: %s)", u.Name, strings.Join(facts, ", "), u.Error)
	}
	return s
}

// bridgeFacts asks OVS once for what the switch and kernel-TCP checks read; nothing when OVSDB
// did not answer (the ovsdb check said so).
func bridgeFacts(ctx context.Context, cfg *Config, ovsdbOK bool) (*BridgeFacts, error) {
	if cfg.OVS == nil || !ovsdbOK {
		return nil, errors.New("OVSDB did not answer")
	}
	ctx, cancel := context.WithTimeout(ctx, ovsTimeout)
	defer cancel()
	return cfg.OVS.BridgeFacts(ctx, cfg.Bridge)
}

// switchChecks are the DPDK, uplink and PMD checks, each failed as "not checked" when OVS could
// not be asked: vhost-user readiness cannot be claimed without them.
func switchChecks(root *fsutil.Dir, cfg *Config, facts *BridgeFacts, factsErr error, bridgeOK bool) []Check {
	init := Check{Name: "ovs-dpdk-init", Status: Fail, Label: fsv1.NodeLabelVhostUser}
	up := Check{Name: "ovs-uplink", Status: Fail, Label: fsv1.NodeLabelVhostUser}
	pmd := Check{Name: "ovs-pmd-cpus", Status: Fail, Label: fsv1.NodeLabelVhostUser}
	if factsErr != nil {
		for _, c := range []*Check{&init, &up, &pmd} {
			c.Detail = "not checked: " + factsErr.Error()
		}
		return []Check{init, up, pmd}
	}
	init = dpdkInit(facts)
	if bridgeOK {
		up = uplink(facts, cfg.Bridge)
	} else {
		up.Detail = "not checked: no bridge to check"
	}
	return []Check{init, up, pmdCPUs(root, cfg, facts)}
}
