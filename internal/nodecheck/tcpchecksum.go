package nodecheck

import (
	"fmt"
	"sort"
	"strings"
)

// Link is one network interface of the node agent's network namespace, as the kernel reports it.
type Link struct {
	Index int
	Name  string
	// Kind is rtnetlink's link kind: "veth", "tun" (OVS userspace internal ports are taps), ""
	// for a physical device.
	Kind string
	// PeerIndex is a veth's other end; PeerElsewhere says it lives in another network namespace
	// (then PeerIndex means nothing here).
	PeerIndex     int
	PeerElsewhere bool
	// TxChecksum is whether the device computes transmitted checksums (ethtool's
	// tx-checksumming); TxErr when the kernel would not say.
	TxChecksum bool
	TxErr      error
}

// Links lists the interfaces of the agent's network namespace (the node's: hostNetwork).
type Links interface {
	Links() ([]Link, error)
}

// BridgeFacts is what the kernel-TCP, DPDK, uplink and PMD checks read from OVSDB, in one
// transaction. Without the bridge only the Open_vSwitch row's facts are set.
type BridgeFacts struct {
	// KernelPorts are the bridge's interfaces a kernel stack sends into: OVS types "" (system:
	// a veth or a NIC), "internal" and "tap". Sorted.
	KernelPorts []string
	// UserspaceTSO is Open_vSwitch other_config:userspace-tso-enable, "" when unset (false).
	UserspaceTSO string
	// DPDKInitialized is the Open_vSwitch column dpdk_initialized: ovs-vswitchd (the DPDK build)
	// started with other_config:dpdk-init and DPDK's EAL came up. DPDKInit is that setting, ""
	// when unset.
	DPDKInitialized bool
	DPDKInit        string
	// PMDCPUMask is other_config:pmd-cpu-mask, "" when unset.
	PMDCPUMask string
	// Uplinks are the bridge's interfaces that can carry traffic off the node: every one but the
	// pods' vhost-user ports and internal ports (the bridge's own included). Sorted by name.
	Uplinks []Uplink
}

// Uplink is one candidate uplink of the bridge, as OVSDB's Interface row has it.
type Uplink struct {
	Name string
	// Type is the Interface's type: "" (system: a kernel NIC or veth), dpdk, patch, vxlan, ...
	Type string
	// LinkState and AdminState are "up", "down" or "" (not reported); Error is the Interface's
	// error column, set when OVS could not open or use it.
	LinkState  string
	AdminState string
	Error      string
}

// tcpFixWhy is the problem the kernel-tcp-checksum check reports, in the words the fix needs.
const tcpFixWhy = "the kernel leaves TCP checksums to the device, OVS's vhost-user ports negotiate no checksum offload, so F-Stack gets every SYN with a bad checksum and drops it (ARP and ping still work)"

// KernelTCP judges whether TCP from kernel senders on the bridge reaches F-Stack: each sender
// (a veth port's other end, an internal port itself) must have tx checksum offload off. It
// decides no label: vhost-user pods run, only kernel clients on the bridge cannot connect.
func KernelTCP(facts *BridgeFacts, links Links) Check {
	c := Check{Name: "kernel-tcp-checksum", Status: Pass}
	if len(facts.KernelPorts) == 0 {
		c.Detail = "no kernel-side ports on the bridge"
		return c
	}
	all, err := links.Links()
	if err != nil {
		c.Status, c.Detail = Warn, errDetail("cannot list the node's interfaces", err)
		c.Fix = "see the node agent's log; " + tcpFixWhy
		return c
	}
	var v senderVerdicts
	v.sort(facts.KernelPorts, all)
	v.judge(&c)
	return c
}

// senderVerdicts are the kernel senders into the bridge, filed by what their tx checksum
// offload is: off (ok), on, or not seen from the node's network namespace.
type senderVerdicts struct{ ok, on, unseen []string }

// sort files each kernel port's sender: a veth port's peer, an internal or tap port itself;
// a NIC's traffic comes from the wire.
func (v *senderVerdicts) sort(ports []string, all []Link) {
	byName, byIndex := map[string]Link{}, map[int]Link{}
	for _, l := range all {
		byName[l.Name], byIndex[l.Index] = l, l
	}
	for _, port := range ports {
		l, found := byName[port]
		switch {
		case !found:
			v.unseen = append(v.unseen, port)
		case l.Kind == "veth" && l.PeerElsewhere:
			v.unseen = append(v.unseen, port+" (its veth peer is in another network namespace)")
		case l.Kind == "veth":
			peer, found := byIndex[l.PeerIndex]
			if !found {
				v.unseen = append(v.unseen, port+" (its veth peer is gone)")
				continue
			}
			judgeSender(peer, port, &v.ok, &v.on, &v.unseen)
		case l.Kind == "":
			v.ok = append(v.ok, port+" (a NIC: its traffic comes from the wire)")
		default:
			judgeSender(l, "", &v.ok, &v.on, &v.unseen)
		}
	}
}

// judge sets c's status, detail and fix from the verdicts: a sender with offload on, or one
// that could not be checked, warns.
func (v *senderVerdicts) judge(c *Check) {
	var parts []string
	if len(v.on) > 0 {
		c.Status = Warn
		parts = append(parts, "tx checksum offload on: "+strings.Join(v.on, ", "))
		names := make([]string, 0, len(v.on))
		for _, s := range v.on {
			names = append(names, strings.Fields(s)[0])
		}
		c.Fix = fmt.Sprintf("ethtool -K <sender> tx off for %s (kernel-stack TCP through them cannot reach F-Stack: %s); "+
			"hack/lib/kernel-sender.sh makes such senders", strings.Join(names, ", "), tcpFixWhy)
	}
	if len(v.unseen) > 0 {
		c.Status = Warn
		parts = append(parts, "not in the node's network namespace, not checked: "+strings.Join(v.unseen, ", "))
		if c.Fix == "" {
			c.Fix = fmt.Sprintf("where those senders live, check `ethtool -k <sender>` says tx-checksumming: off, else run ethtool -K <sender> tx off (%s)", tcpFixWhy)
		}
	}
	if len(v.ok) > 0 {
		parts = append(parts, "tx checksum offload off: "+strings.Join(v.ok, ", "))
	}
	sort.Strings(parts)
	c.Detail = strings.Join(parts, "; ")
}

// judgeSender files a sender under ok, on or unseen; port names the bridge port it is the
// peer of, if it is one.
func judgeSender(l Link, port string, ok, on, unseen *[]string) {
	name := l.Name
	if port != "" {
		name = fmt.Sprintf("%s (peer of port %s)", l.Name, port)
	}
	switch {
	case l.TxErr != nil:
		*unseen = append(*unseen, fmt.Sprintf("%s (%v)", name, l.TxErr))
	case l.TxChecksum:
		*on = append(*on, name)
	default:
		*ok = append(*ok, name)
	}
}

// UserspaceTSO reports OVS's userspace-tso-enable, for information: with it OVS offers
// checksum offload to vhost-user guests and completes checksums for the ones that do not take it
// (not yet measured against real F-Stack, so it decides nothing here).
func UserspaceTSO(facts *BridgeFacts) Check {
	v := facts.UserspaceTSO
	if v == "" {
		v = "false (unset)"
	}
	return Check{Name: "ovs-userspace-tso", Status: Pass, Detail: "other_config:userspace-tso-enable=" + v}
}

// kernelTCPChecks runs both checks; OVSDB errors were already reported by the bridge checks.
func kernelTCPChecks(cfg *Config, facts *BridgeFacts, factsErr error, bridgeOK bool) []Check {
	c := Check{Name: "kernel-tcp-checksum", Status: Warn}
	tso := Check{Name: "ovs-userspace-tso", Status: Warn}
	if !bridgeOK || cfg.OVS == nil {
		c.Detail, tso.Detail = "not checked: no bridge to check", "not checked: no bridge to check"
		return []Check{c, tso}
	}
	if factsErr != nil {
		c.Detail, tso.Detail = errDetail("OVSDB", factsErr), errDetail("OVSDB", factsErr)
		return []Check{c, tso}
	}
	if cfg.Links == nil {
		c.Detail = "not checked: the node agent cannot list interfaces"
		return []Check{c, UserspaceTSO(facts)}
	}
	return []Check{KernelTCP(facts, cfg.Links), UserspaceTSO(facts)}
}
