package plugin

import (
	"fmt"
	"strconv"
	"strings"
)

// Tx steering decides which of a vhost-user port's queues OVS puts a guest-bound packet on.
// With OVS's default ("thread") a port takes the queue of the OVS thread that forwards the
// packet, so every packet from the same thread lands on one queue and an F-Stack stack with
// several processes (process k polls queue k) serves with one. "hash" spreads packets over the
// queues by their flow hash. Every port gets it, whatever its queue count: the count is the
// pod's DPDK's to negotiate after ADD (the supervisor renders queues= from the stack's
// processes), and OVS itself falls back to thread steering on a port with one queue (dpif-netdev
// uses hash mode only when the port has more than one tx queue), so it costs single-queue pods
// nothing.
const (
	otherConfigTxSteering = "tx-steering"
	txSteeringHash        = "hash"
)

// minTxSteeringOVS is the first OVS release that honours other_config:tx-steering; older ones
// keep the key in OVSDB and ignore it.
var minTxSteeringOVS = [2]int{3, 1}

// ignoresTxSteering reports whether version (such as "3.0.3" or "2.17.9-1ubuntu") is an OVS
// that ignores tx-steering. An empty or unreadable version is not known to be too old.
func ignoresTxSteering(version string) bool {
	major, rest, ok := strings.Cut(version, ".")
	if !ok {
		return false
	}
	minorDigits := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorDigits = rest[:i]
	}
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minorDigits)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma < minTxSteeringOVS[0] || ma == minTxSteeringOVS[0] && mi < minTxSteeringOVS[1]
}

// warnOldOVS logs, after a successful ADD, that the port's queues will not all receive. It is a
// warning, not a refusal: the plugin cannot know how many queues the pod will use, and a pod
// with one queue (the default) works fully on an older OVS, while a stack with more processes
// still serves, from its first process only.
func (c *command) warnOldOVS(a *attachment, version string) {
	if !ignoresTxSteering(version) {
		return
	}
	c.log.Warn(fmt.Sprintf("OVS %s ignores other_config:tx-steering=hash (it needs OVS %d.%d or newer): every packet to "+
		"port %s reaches its queue 0, so an F-Stack stack with more than one process serves with the first only; "+
		"upgrade Open vSwitch on this node", version, minTxSteeringOVS[0], minTxSteeringOVS[1], a.PortName), "ovsVersion", version)
}

// checkTxSteering is CHECK's test of the port's steering, with the fix in the message.
func checkTxSteering(port *portInfo) error {
	if port.TxSteering == txSteeringHash {
		return nil
	}
	got := strconv.Quote(port.TxSteering)
	if port.TxSteering == "" {
		got = "unset (OVS's default, thread)"
	}
	return fmt.Errorf("OVS port %s has other_config:tx-steering %s, want %q: without it every packet to the pod reaches "+
		"queue 0 and only the first F-Stack process serves; run `ovs-vsctl set Interface %s other_config:tx-steering=%s` "+
		"(applied live), or recreate the pod", port.Name, got, txSteeringHash, port.Name, txSteeringHash)
}
