package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// ADD numbers its port itself (Interface.ofport_request) so that the anti-spoofing rules can be
// put on that number before the port exists, and ADD need not wait the tens of milliseconds
// ovs-vswitchd takes to make a vhost-user port (and reload its PMD threads) before it could
// learn the number. Facts from OVS this rests on (OVS 3.1, checked on the node tier):
//   - ovs-vswitchd gives a port the number it requests unless another port of the bridge holds
//     it then; otherwise it picks one itself, and it picks only numbers below 32768 (OVS leaves
//     the upper half of the range to controllers). So a number from ofportFirst up is never
//     taken by a port nobody numbered.
//   - OpenFlow rules may match an in_port no port has; they apply from the moment a port gets
//     that number. ovs-vswitchd deletes a port without its rules, and removes the ports of a
//     reconfiguration before it adds the new ones.
//
// A number is chosen under the socket root's lock (so two ADDs never write rules on the same
// one), the lowest that no Interface holds or requests in OVSDB; the transaction that makes the
// port fails unless that is still so (ofportWaits), which covers a client that does not take
// the lock. The rules go on it in a bundle that first clears the number, before the port's
// transaction: from its first frame the port is guarded. If ovs-vswitchd still grants another
// number (a client that requested the same one while ovs-vswitchd was down, say), the rules
// are not on the port: the node agent's flow keeper puts them on the number the port has and
// says so, CHECK fails until then, and the next ADD on the node repairs it (repairMisnumbered).
//
// DEL leaves the rules of a port it removes on its number, where they match no port (ADD's
// bundle clears the number before it gives it again); the lowest free number is handed out,
// so the numbers holding such rules are never more than the node's most ports at once.
const (
	ofportFirst = 32768
	ofportLast  = 65279 // OpenFlow's last physical port number (0xfeff)
)

// numbered is an Interface's number facts as OVSDB has them.
type numbered struct {
	name              string
	ofport, requested int64 // 0: not set
}

// chooseOFPort reads every Interface's number and requested number, and returns the lowest
// number of the plugin's range that none holds or requests. The caller holds the socket root's
// lock. It also returns the ports ovs-vswitchd numbered other than they asked. The same read
// checks the bridge, whose mistakes (missing, not netdev) are the user's to fix and must be
// said before the rules are sent to a bridge that cannot take them.
func (o *ovs) chooseOFPort(ctx context.Context, bridge string) (int64, []numbered, error) {
	res, err := o.transact(ctx, ovsdb.Select("Interface", nil, "name", "ofport", "ofport_request"), selectBridge(bridge))
	if err != nil {
		return 0, nil, err
	}
	if err := bridgeErr(bridge, res[1].Rows); err != nil {
		return 0, nil, err
	}
	used := map[int64]bool{}
	var misnumbered []numbered
	for _, row := range res[0].Rows {
		n, err := decodeNumbered(row)
		if err != nil {
			return 0, nil, err
		}
		used[n.ofport], used[n.requested] = true, true
		if n.requested >= ofportFirst && n.ofport > 0 && n.ofport != n.requested {
			misnumbered = append(misnumbered, n)
		}
	}
	n, err := lowestFree(used)
	return n, misnumbered, err
}

func decodeNumbered(row ovsdb.Row) (numbered, error) {
	var n numbered
	var err error
	if n.name, err = row.String("name"); err != nil {
		return n, err
	}
	if n.ofport, _, err = row.OptionalInt("ofport"); err != nil {
		return n, err
	}
	n.requested, _, err = row.OptionalInt("ofport_request")
	return n, err
}

// errNoOFPort says every number of the plugin's range is held or requested.
var errNoOFPort = fmt.Errorf("no OpenFlow port number left in %d-%d on the node: every one is held or requested by an OVS interface", ofportFirst, ofportLast)

// lowestFree is the lowest number of the range that is not used.
func lowestFree(used map[int64]bool) (int64, error) {
	for n := int64(ofportFirst); n <= ofportLast; n++ {
		if !used[n] {
			return n, nil
		}
	}
	return 0, errNoOFPort
}

// ofportWaits make the port's transaction fail unless no Interface holds or requests n.
func ofportWaits(n int64) []ovsdb.Op {
	none := []map[string]any{}
	return []ovsdb.Op{
		ovsdb.WaitEqual("Interface", [][]any{ovsdb.Cond("ofport_request", "==", n)}, []string{"name"}, none),
		ovsdb.WaitEqual("Interface", [][]any{ovsdb.Cond("ofport", "==", n)}, []string{"name"}, none),
	}
}

// ofportWaitIndex is the position of ofportWaits in addPort's transaction.
const ofportWaitIndex = 2

func isOFPortWait(err error) bool {
	var tx *ovsdb.TxError
	return ovsdb.IsConditionFailed(err) && errors.As(err, &tx) && (tx.Index == ofportWaitIndex || tx.Index == ofportWaitIndex+1)
}

// guardNewPort chooses the port's number and puts its rules on it, under the socket root's lock,
// which stays held (unlock) until the port's transaction has committed or failed: no other ADD
// may choose the number in between. It registers the rules' removal in undo.
func (c *command) guardNewPort(a *attachment, undo *[]func() error) (n int64, unlock func(), err error) {
	rd, err := fsutil.MkdirAllOpen(c.conf.SocketRoot, 0o755)
	if err != nil {
		return 0, nil, fmt.Errorf("open socket root: %w", err)
	}
	if err := lockDir(rd); err != nil {
		rd.Close()
		return 0, nil, err
	}
	release := func() { rd.Close() } // closing the root unlocks
	defer func() {
		if err != nil {
			release()
		}
	}()
	n, misnumbered, err := c.ovs.chooseOFPort(c.ctx, c.conf.Bridge)
	if err != nil {
		return 0, nil, ovsErr(err)
	}
	c.repairMisnumbered(misnumbered)
	g := c.newGuard(a)
	g.OFPort = n
	*undo = append(*undo, func() error { return c.flows.Unguard(c.ctx, g) })
	if err := c.flows.Guard(c.ctx, g); err != nil {
		return 0, nil, err
	}
	return n, release, nil
}

// repairMisnumbered puts the rules of the plugin's ports that ovs-vswitchd numbered other than
// they asked on the number they have, and says so. It never fails the ADD: the flow keeper
// repairs them as well.
func (c *command) repairMisnumbered(ports []numbered) {
	for _, p := range ports {
		port, err := c.ovs.findPort(c.ctx, p.name)
		if err != nil || port == nil || port.IDs[podcontract.OVSIDOwner] != pluginType {
			continue
		}
		g, err := c.guardOfPort(p.name, port.IDs)
		if err == nil {
			if c.flows.Check(c.ctx, g) == nil {
				continue // moved already (by the keeper, or an earlier ADD)
			}
			g.OFPort = p.ofport
			err = c.flows.Guard(c.ctx, g)
		}
		c.log.Warn("ovs-vswitchd gave a port another OpenFlow port number than it requested (another OVS client requested the same one?); "+
			"its anti-spoofing rules are moved to the number it has", logging.KeyPort, p.name, "requested", p.requested, "ofport", p.ofport,
			logging.KeyNamespace, port.IDs[podcontract.OVSIDPodNamespace], logging.KeyPod, port.IDs[podcontract.OVSIDPodName], logging.KeyErr, err)
	}
}

// inRange says whether n is a number the plugin hands out.
func inRange(n int64) bool { return n >= ofportFirst && n <= ofportLast }
