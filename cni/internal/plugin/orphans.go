package plugin

import (
	"errors"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A node that lost its tmpfs (a reboot: /var/run is gone, OVSDB's file is not) keeps every port
// of its old sandboxes, whose DEL never comes. The next ADD of the same pod and interface gives
// OVS the same socket path: ADD's transaction waits for "no other port on this socket", so the
// usual ADD pays nothing for the check; when an orphan is there, it is removed in a transaction
// of its own and the ADD is made again. GC removes the others (they are not in its valid list).

// orphanWaitIndex is the position of noOtherPortOn in addPort's transaction.
const orphanWaitIndex = 1

// noOtherPortOn aborts the transaction when a port of another name has p's socket.
func noOtherPortOn(p *portSpec) ovsdb.Op {
	return ovsdb.WaitEqual("Interface", otherPortsOn(p), []string{"name"}, []map[string]any{})
}

func otherPortsOn(p *portSpec) [][]any {
	return [][]any{
		ovsdb.Cond("options", "includes", ovsdb.Map(map[string]string{optionSocket: p.Socket})),
		ovsdb.Cond("name", "!=", p.Name),
	}
}

func isOrphanWait(err error) bool {
	var tx *ovsdb.TxError
	return ovsdb.IsConditionFailed(err) && errors.As(err, &tx) && tx.Index == orphanWaitIndex
}

// removeOrphanPorts removes the ports of another name on a's socket. Only the plugin's own are
// removed; a port someone else put on the socket makes the ADD fail, saying which.
func (c *command) removeOrphanPorts(a *attachment) error {
	spec := a.portSpec(c.conf.MTU)
	ports, err := c.ovs.selectPorts(c.ctx, otherPortsOn(spec))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range ports {
		if p.IDs[podcontract.OVSIDOwner] != pluginType {
			errs = append(errs, errors.New("OVS port "+p.Name+" of another owner uses socket "+a.Socket))
			continue
		}
		c.log.Info("removing a port left on this socket", "orphan", p.Name, logging.KeyContainerID, p.IDs[podcontract.OVSIDContainerID])
		errs = append(errs, c.ovs.deletePort(c.ctx, p.Name))
	}
	return errors.Join(errs...)
}
