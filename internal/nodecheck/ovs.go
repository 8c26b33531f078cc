package nodecheck

import (
	"context"
	"fmt"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/cni/pkg/ovsdb"
)

// ovsTimeout bounds one OVSDB question, so a hung ovsdb-server fails the check, not the agent.
const ovsTimeout = 5 * time.Second

// bridge checks that OVSDB answers and has the bridge as a netdev (userspace, DPDK) bridge, the
// only kind that takes dpdkvhostuserclient ports.
func bridge(ctx context.Context, cfg *Config) []Check {
	db := Check{Name: "ovsdb", Status: Fail, Label: fsv1.NodeLabelVhostUser}
	br := Check{Name: "ovs-bridge", Status: Fail, Label: fsv1.NodeLabelVhostUser}
	if cfg.OVS == nil {
		db.Detail, db.Fix = "no OVSDB socket configured", "set the chart value nodeAgent.ovsdbSocket"
		br.Detail = "not checked"
		return []Check{db, br}
	}
	ctx, cancel := context.WithTimeout(ctx, ovsTimeout)
	defer cancel()
	dt, found, err := cfg.OVS.BridgeDatapath(ctx, cfg.Bridge)
	if err != nil {
		db.Detail = err.Error()
		db.Fix = "start OVS-DPDK (ovsdb-server and ovs-vswitchd), or point the chart value nodeAgent.ovsdbSocket at its database socket"
		br.Detail, br.Fix = "not checked: OVSDB did not answer", db.Fix
		return []Check{db, br}
	}
	db.Status, db.Detail = Pass, "answers"
	switch {
	case !found:
		br.Detail = fmt.Sprintf("no bridge %q", cfg.Bridge)
		br.Fix = fmt.Sprintf("ovs-vsctl add-br %s -- set bridge %s datapath_type=netdev", cfg.Bridge, cfg.Bridge)
	case dt != "netdev":
		br.Detail = fmt.Sprintf("bridge %q has datapath_type %q", cfg.Bridge, dt)
		br.Fix = fmt.Sprintf("vhost-user ports need a userspace bridge: ovs-vsctl set bridge %s datapath_type=netdev (OVS built with DPDK, other_config:dpdk-init=true)", cfg.Bridge)
	default:
		br.Status, br.Detail = Pass, fmt.Sprintf("bridge %q, datapath netdev", cfg.Bridge)
	}
	return []Check{db, br}
}

// OVSDB asks the database behind a unix socket, one connection per question.
type OVSDB struct {
	Socket string
}

// BridgeDatapath implements OVS.
func (o *OVSDB) BridgeDatapath(ctx context.Context, name string) (string, bool, error) {
	c, err := ovsdb.Dial(ctx, o.Socket)
	if err != nil {
		return "", false, fmt.Errorf("OVSDB at %s: %w", o.Socket, err)
	}
	defer c.Close()
	res, err := c.Transact(ctx, "Open_vSwitch",
		ovsdb.Select("Bridge", [][]any{ovsdb.Cond("name", "==", name)}, "datapath_type"))
	if err != nil {
		return "", false, fmt.Errorf("OVSDB at %s: %w", o.Socket, err)
	}
	if len(res) == 0 || len(res[0].Rows) == 0 {
		return "", false, nil
	}
	dt, err := res[0].Rows[0].String("datapath_type")
	return dt, true, err
}
