package nodecheck

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
)

// ovsTimeout bounds one OVSDB question, so a hung ovsdb-server fails the check, not the agent.
const ovsTimeout = 5 * time.Second

// bridge checks that OVSDB answers and has the bridge as a netdev (userspace, DPDK) bridge, the
// only kind that takes dpdkvhostuserclient ports.
func bridge(ctx context.Context, cfg *Config) []Check {
	db := Check{Name: "ovsdb", Status: Fail, Label: fsv1.NodeLabelVhostUser}
	br := Check{Name: "ovs-bridge", Status: Fail, Label: fsv1.NodeLabelVhostUser}
	if cfg.OVS == nil {
		db.Detail, db.Fix = "no OVS answers configured", "run the node agent with --ovs-answers, the file the CNI installer container writes (chart value cni.nodeAgent.ovsdbSocket)"
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

// BridgeFacts implements OVS: the bridge's kernel-side interfaces and uplinks, OVS's DPDK state
// and its userspace TSO and PMD settings, in one transaction (rows of every Port and Interface,
// joined here: a node has one per pod).
func (o *OVSDB) BridgeFacts(ctx context.Context, name string) (*BridgeFacts, error) {
	c, err := ovsdb.Dial(ctx, o.Socket)
	if err != nil {
		return nil, fmt.Errorf("OVSDB at %s: %w", o.Socket, err)
	}
	defer c.Close()
	res, err := c.Transact(ctx, "Open_vSwitch",
		ovsdb.Select("Open_vSwitch", nil, "other_config", "dpdk_initialized"),
		ovsdb.Select("Bridge", [][]any{ovsdb.Cond("name", "==", name)}, "ports"),
		ovsdb.Select("Port", nil, "_uuid", "interfaces"),
		ovsdb.Select("Interface", nil, "_uuid", "name", "type", "link_state", "admin_state", "error"))
	if err != nil {
		return nil, fmt.Errorf("OVSDB at %s: %w", o.Socket, err)
	}
	facts := &BridgeFacts{}
	if len(res[0].Rows) > 0 {
		row := res[0].Rows[0]
		other, err := row.Map("other_config")
		if err != nil {
			return nil, err
		}
		facts.UserspaceTSO, facts.DPDKInit, facts.PMDCPUMask = other["userspace-tso-enable"], other["dpdk-init"], other["pmd-cpu-mask"]
		if facts.DPDKInitialized, err = row.Bool("dpdk_initialized"); err != nil {
			return nil, err
		}
	}
	if len(res[1].Rows) == 0 {
		return facts, nil
	}
	err = joinInterfaces(res[1].Rows[0], res[2].Rows, res[3].Rows, facts)
	return facts, err
}

// joinInterfaces joins bridge -> ports -> interfaces and files each interface of the bridge
// under the kernel ports, the uplinks, both or neither.
func joinInterfaces(bridge ovsdb.Row, ports, ifaces []ovsdb.Row, facts *BridgeFacts) error {
	onBridge, err := bridge.UUIDs("ports")
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, p := range ports {
		id, err := p.UUID("_uuid")
		if err != nil {
			return err
		}
		if !slices.Contains(onBridge, id) {
			continue
		}
		ids, err := p.UUIDs("interfaces")
		if err != nil {
			return err
		}
		for _, i := range ids {
			want[i] = true
		}
	}
	for _, i := range ifaces {
		id, err := i.UUID("_uuid")
		if err != nil {
			return err
		}
		if !want[id] {
			continue
		}
		var u Uplink
		for col, dst := range map[string]*string{"name": &u.Name, "type": &u.Type, "link_state": &u.LinkState, "admin_state": &u.AdminState, "error": &u.Error} {
			if *dst, err = i.String(col); err != nil {
				return err
			}
		}
		if u.Type == "" || u.Type == "system" || u.Type == "internal" || u.Type == "tap" {
			facts.KernelPorts = append(facts.KernelPorts, u.Name)
		}
		if isUplinkType(u.Type) {
			facts.Uplinks = append(facts.Uplinks, u)
		}
	}
	sort.Strings(facts.KernelPorts)
	sort.Slice(facts.Uplinks, func(a, b int) bool { return facts.Uplinks[a].Name < facts.Uplinks[b].Name })
	return nil
}
