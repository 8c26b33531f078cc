package plugin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

const (
	ovsDB        = "Open_vSwitch"
	portType     = "dpdkvhostuserclient"
	optionSocket = "vhost-server-path"
)

// The external_ids keys that identify an attachment on its OVS port are the pod contract's
// (podcontract.OVSID*): CHECK, DEL and GC find everything they need there, so the port is the
// plugin's only state.

var (
	errBridgeMissing    = errors.New("bridge does not exist")
	errBridgeNotNetdev  = errors.New("bridge is not a netdev (userspace) bridge")
	errOVSDBUnreachable = errors.New("OVSDB unreachable")
)

// ovs holds one OVSDB connection for the life of a CNI command, redialling after a failure so a
// rollback can still reach a restarted server.
type ovs struct {
	path string
	c    *ovsdb.Client
}

// portInfo is what the plugin reads back from an Interface row.
type portInfo struct {
	Name       string
	Type       string
	Socket     string
	TxSteering string // other_config:tx-steering; "" is OVS's default, thread
	IDs        map[string]string
	// Requested is the OpenFlow port number the port requested (0: none, as an fstack-cni
	// before ofport.go made them) and OFPort the one it has (0: none yet); read only where
	// selected.
	Requested, OFPort int64
}

func (o *ovs) close() {
	if o.c != nil {
		_ = o.c.Close()
		o.c = nil
	}
}

// connect dials unless a connection is open. It needs no round trip, and a refused or missing
// socket is the usual sign that ovsdb-server is not running.
func (o *ovs) connect(ctx context.Context) error {
	if o.c != nil {
		return nil
	}
	c, err := ovsdb.Dial(ctx, o.path)
	if err != nil {
		return fmt.Errorf("%w at %s (is ovsdb-server running?): %w", errOVSDBUnreachable, o.path, err)
	}
	o.c = c
	return nil
}

func (o *ovs) transact(ctx context.Context, ops ...ovsdb.Op) ([]ovsdb.Result, error) {
	if err := o.connect(ctx); err != nil {
		return nil, err
	}
	res, err := o.c.Transact(ctx, ovsDB, ops...)
	if errors.Is(err, ovsdb.ErrClosed) || ctx.Err() != nil {
		o.close()
		return nil, fmt.Errorf("%w at %s: %w", errOVSDBUnreachable, o.path, err)
	}
	return res, err
}

func nameIs(name string) [][]any { return [][]any{ovsdb.Cond("name", "==", name)} }

// checkBridge tells apart the two configuration mistakes a user can fix.
func (o *ovs) checkBridge(ctx context.Context, bridge string) error {
	res, err := o.transact(ctx, selectBridge(bridge))
	if err != nil {
		return err
	}
	return bridgeErr(bridge, res[0].Rows)
}

func selectBridge(bridge string) ovsdb.Op {
	return ovsdb.Select("Bridge", nameIs(bridge), "datapath_type")
}

func bridgeErr(bridge string, rows []ovsdb.Row) error {
	if len(rows) == 0 {
		return fmt.Errorf("%w: %q (create it with datapath_type=netdev)", errBridgeMissing, bridge)
	}
	dt, err := rows[0].String("datapath_type")
	if err != nil {
		return err
	}
	if dt != "netdev" {
		return fmt.Errorf("%w: %q has datapath_type %q; vhost-user ports need netdev", errBridgeNotNetdev, bridge, dt)
	}
	return nil
}

func firstUUID(rows []ovsdb.Row) (string, error) {
	if len(rows) == 0 {
		return "", nil
	}
	return rows[0].UUID("_uuid")
}

// addPort creates Interface + Port and links them to the bridge in one transaction, the
// Interface requesting p.OFPort (ofportWaits: no other holds or requests it). The wait
// makes the server refuse the whole transaction unless the bridge exists and is netdev; mutate
// (not a rewrite of the ports column) lets many ADDs run concurrently. The Port row gets the
// UUID portUUID gives its name, so DEL can unlink it without looking it up. The Interface asks
// for hash tx steering (see txsteering.go), and the last operation reads the switch's facts:
// the OVS version that decides whether it is honoured and the PMD threads' CPUs (see
// switchcpus.go). The error is the raw transaction error, which createPort tells apart. The
// waits of noOtherClaims follow.
func (o *ovs) addPort(ctx context.Context, bridge string, p *portSpec) (switchFacts, error) {
	iface := map[string]any{
		"name": p.Name, "type": portType, "external_ids": ovsdb.Map(p.IDs),
		"options": ovsdb.Map(map[string]string{optionSocket: p.Socket}), "mtu_request": p.MTU,
		"other_config":   ovsdb.Map(map[string]string{otherConfigTxSteering: txSteeringHash}),
		"ofport_request": p.OFPort,
	}
	port := map[string]any{"name": p.Name, "interfaces": ovsdb.NamedUUID("iface"), "external_ids": ovsdb.Map(p.IDs)}
	ops := []ovsdb.Op{
		ovsdb.WaitEqual("Bridge", nameIs(bridge), []string{"datapath_type"}, []map[string]any{{"datapath_type": "netdev"}}),
		noOtherPortOn(p),
	}
	ops = append(ops, ofportWaits(p.OFPort)...)
	ops = append(ops,
		ovsdb.Insert("Interface", iface, "iface"),
		ovsdb.InsertWithUUID("Port", port, "port", portUUID(p.Name)),
		ovsdb.Mutate("Bridge", nameIs(bridge), []any{"ports", "insert", ovsdb.Set(ovsdb.NamedUUID("port"))}),
		ovsdb.Select("Open_vSwitch", nil, "ovs_version", "other_config"))
	res, err := o.transact(ctx, append(ops, noOtherClaims(p)...)...)
	if err != nil {
		return switchFacts{}, err
	}
	return switchFactsOf(res[claimWaitIndex-1].Rows), nil
}

// deletePort unlinks the named port from every bridge. A missing port is success.
func (o *ovs) deletePort(ctx context.Context, name string) error {
	res, err := o.transact(ctx, ovsdb.Select("Port", nameIs(name), "_uuid"))
	if err != nil {
		return err
	}
	id, err := firstUUID(res[0].Rows)
	if err != nil || id == "" {
		return err
	}
	return o.unlinkPort(ctx, id)
}

// unlinkPort removes the Port row id from every bridge; OVSDB then garbage-collects the Port
// and its Interface, which are not root rows. The "includes" condition makes a port someone
// else removed meanwhile a no-op rather than an error.
func (o *ovs) unlinkPort(ctx context.Context, id string) error {
	_, err := o.transact(ctx, ovsdb.Mutate("Bridge",
		[][]any{ovsdb.Cond("ports", "includes", ovsdb.UUID(id))},
		[]any{"ports", "delete", ovsdb.Set(ovsdb.UUID(id))}))
	return err
}

// removePortForDel reads the port's Interface (DEL needs its socket to find the pod directory
// ADD used) and unlinks the Port in the same transaction, by the UUID ADD gave it: one round
// trip. A port made before ADD chose the UUID (an older fstack-cni) is found but not unlinked by
// it; deletePort then removes it by name.
func (o *ovs) removePortForDel(ctx context.Context, name string) (*portInfo, error) {
	id := portUUID(name)
	res, err := o.transact(ctx, selectInterfaces(nameIs(name), "ofport_request", "ofport"), ovsdb.Mutate("Bridge",
		[][]any{ovsdb.Cond("ports", "includes", ovsdb.UUID(id))},
		[]any{"ports", "delete", ovsdb.Set(ovsdb.UUID(id))}))
	if err != nil {
		return nil, err
	}
	ports, err := decodePorts(res[0].Rows)
	if err != nil || len(ports) == 0 {
		return nil, err
	}
	if res[1].Count == 0 {
		return &ports[0], o.deletePort(ctx, name)
	}
	return &ports[0], nil
}

// portUUID is the UUID of the Port row named name: a UUID (version 8, RFC 9562) made of the
// name's SHA-256, so a pure function of the attachment like the name itself.
func portUUID(name string) string {
	s := sha256.Sum256([]byte("kube-fstack.io/port/" + name))
	s[6] = s[6]&0x0f | 0x80
	s[8] = s[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// findPort returns the port's Interface, or nil when there is none. It alone reads the tx
// steering (for CHECK); DEL and GC do not need it.
func (o *ovs) findPort(ctx context.Context, name string) (*portInfo, error) {
	ports, err := o.selectPorts(ctx, nameIs(name), "other_config")
	if err != nil || len(ports) == 0 {
		return nil, err
	}
	return &ports[0], nil
}

// listPorts returns every port this plugin made for network.
func (o *ovs) listPorts(ctx context.Context, network string) ([]portInfo, error) {
	ids := ovsdb.Map(map[string]string{podcontract.OVSIDOwner: pluginType, podcontract.OVSIDNetwork: network})
	return o.selectPorts(ctx, [][]any{ovsdb.Cond("external_ids", "includes", ids)})
}

func (o *ovs) selectPorts(ctx context.Context, where [][]any, extra ...string) ([]portInfo, error) {
	res, err := o.transact(ctx, selectInterfaces(where, extra...))
	if err != nil {
		return nil, err
	}
	return decodePorts(res[0].Rows)
}

func selectInterfaces(where [][]any, extra ...string) ovsdb.Op {
	return ovsdb.Select("Interface", where, append([]string{"name", "type", "options", "external_ids"}, extra...)...)
}

func decodePorts(rows []ovsdb.Row) ([]portInfo, error) {
	ports := make([]portInfo, 0, len(rows))
	for _, row := range rows {
		p, err := decodePort(row)
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

func decodePort(row ovsdb.Row) (portInfo, error) {
	var p portInfo
	var err error
	if p.Name, err = row.String("name"); err != nil {
		return p, err
	}
	if p.Type, err = row.String("type"); err != nil {
		return p, err
	}
	opts, err := row.Map("options")
	if err != nil {
		return p, err
	}
	p.Socket = opts[optionSocket]
	if _, selected := row["ofport_request"]; selected {
		if p.Requested, _, err = row.OptionalInt("ofport_request"); err != nil {
			return p, err
		}
	}
	if _, selected := row["ofport"]; selected {
		if p.OFPort, _, err = row.OptionalInt("ofport"); err != nil {
			return p, err
		}
	}
	if _, selected := row["other_config"]; selected {
		other, err := row.Map("other_config")
		if err != nil {
			return p, err
		}
		p.TxSteering = other[otherConfigTxSteering]
	}
	p.IDs, err = row.Map("external_ids")
	return p, err
}
