// Package flowkeeper keeps fstack-cni's anti-spoofing rules on every port it made. OVS holds
// OpenFlow rules only in ovs-vswitchd's memory: after ovs-vswitchd restarts (an OVS upgrade,
// node maintenance, a crash) the ports come back from OVSDB without their rules, and the
// bridge's default NORMAL flow forwards whatever a pod sends. The plugin runs only per CNI
// command, so something long-running must put them back: the CNI DaemonSet's installer
// container runs a Keeper.
//
// Everything a port's rules are made of comes from OVSDB, which only root on the node writes:
// the port's name (its cookie), its ofport and the MAC ADD stored in its external_ids. Nothing
// a pod can write is read.
package flowkeeper

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/cni/internal/openflow"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Keeper checks every port fstack-cni made, on every bridge, and re-applies the rules of those
// that lack them. It holds one OpenFlow connection per bridge: ovs-vswitchd exiting ends it,
// which wakes the keeper at once, and it checks again as soon as the bridge answers.
type Keeper struct {
	// OVSDB is OVSDB's unix socket; ovs-vswitchd makes the bridges' management sockets
	// (<bridge>.mgmt) in the same directory.
	OVSDB string
	// Period is how often every port is checked without a restart being seen (someone ran
	// del-flows, or a restart came and went between two reads).
	Period time.Duration
	// Retry is how soon to check again while OVS is away or a port has no ofport yet.
	Retry time.Duration
	Log   *slog.Logger

	conns map[string]*openflow.Client
	wake  chan struct{}
	// said holds the problems already logged, so each is logged once while it lasts.
	said map[string]bool
}

// port is one of fstack-cni's ports as OVSDB has it.
type port struct {
	Name, Bridge   string
	IDs            map[string]string // what the rules are made of (antispoof.SpecFromIDs)
	OFPort         int64             // 0: not numbered yet (or ovs-vswitchd could not create it)
	Namespace, Pod string
	// Requested is the number the port's ADD requested for it and put its rules on (0: none);
	// ovs-vswitchd gives another when some other port holds that one.
	Requested int64
}

// requestTimeout bounds one question to OVSDB or a bridge, so a hung daemon delays the keeper
// by that, not forever.
const requestTimeout = 10 * time.Second

// Run checks at once, then after every period, every bridge connection lost and every retry,
// until ctx ends.
func (k *Keeper) Run(ctx context.Context) {
	k.conns, k.said, k.wake = map[string]*openflow.Client{}, map[string]bool{}, make(chan struct{}, 1)
	defer func() {
		for _, c := range k.conns {
			_ = c.Close()
		}
	}()
	for {
		wait := k.Period
		if !k.Pass(ctx) {
			wait = k.Retry
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-k.wake:
			t.Stop()
		}
	}
}

// Pass checks every port once and puts back the rules of those without them. It returns false
// when something is not ready (OVSDB or a bridge away, a port without its ofport), so Run
// checks again soon.
func (k *Keeper) Pass(ctx context.Context) bool {
	if k.conns == nil {
		k.conns, k.said = map[string]*openflow.Client{}, map[string]bool{}
	}
	ports, bridges, err := k.list(ctx)
	if err != nil {
		k.once("ovsdb", "cannot list fstack-cni's OVS ports; their anti-spoofing flows are checked again once OVSDB answers", logging.KeyErr, err)
		return false
	}
	k.clear("ovsdb")
	ready := true
	var applied []port
	for _, p := range ports {
		ok, did := k.keep(ctx, p)
		// After re-applying, check again soon: right after a restart the ofport OVSDB still
		// had may be one ovs-vswitchd is about to change.
		ready = ready && ok && !did
		if did {
			applied = append(applied, p)
		}
	}
	// A connection to every netdev bridge, ports or not: its end is how a restart is seen, and a
	// port ADD makes before the next pass must not wait a period for its rules after one.
	for _, b := range bridges {
		_, _ = k.conn(ctx, b)
	}
	k.closeUnused(ports, bridges)
	if len(applied) > 0 {
		k.dropDeleted(ctx, applied)
	}
	return ready
}

// keep checks one port's rules and re-applies them when they are not all there. ok is false
// when the port could not be checked yet.
func (k *Keeper) keep(ctx context.Context, p port) (ok, applied bool) {
	log := k.Log.With(logging.KeyPort, p.Name, "bridge", p.Bridge, logging.KeyNamespace, p.Namespace, logging.KeyPod, p.Pod)
	if p.IDs[antispoof.ExternalIDMAC] == "" {
		k.once("mac/"+p.Name, "port has no "+antispoof.ExternalIDMAC+" (made by an older fstack-cni): its anti-spoofing flows cannot be restored after an OVS restart; recreate the pod to renew the port",
			logging.KeyPort, p.Name, logging.KeyNamespace, p.Namespace, logging.KeyPod, p.Pod)
		return true, false
	}
	rules, err := rulesOf(p)
	if err != nil {
		k.once("mac/"+p.Name, "port's anti-spoofing flows cannot be restored", logging.KeyPort, p.Name, logging.KeyErr, err)
		return true, false
	}
	if p.OFPort <= 0 {
		return false, false // ovs-vswitchd has not numbered it yet (it is starting)
	}
	c, err := k.conn(ctx, p.Bridge)
	if err != nil {
		k.once("bridge/"+p.Bridge, "bridge's ovs-vswitchd unreachable; its ports' anti-spoofing flows are checked again once it answers", "bridge", p.Bridge, logging.KeyErr, err)
		return false, false
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	cookie := antispoof.Cookie(p.Name)
	n, err := c.FlowCount(rctx, openflow.TableAll, cookie, ^uint64(0), antispoof.InPort(p.OFPort))
	if err == nil && int(n) == len(rules) {
		k.clear("misnumbered/" + p.Name)
		return true, false
	}
	if p.Requested > 0 && p.Requested != p.OFPort {
		k.once("misnumbered/"+p.Name, "ovs-vswitchd gave the port another OpenFlow port number than its ADD requested and put its anti-spoofing flows on "+
			"(another OVS client requested the same number?); moving them to the number it has",
			logging.KeyPort, p.Name, "bridge", p.Bridge, logging.KeyNamespace, p.Namespace, logging.KeyPod, p.Pod, "requested", p.Requested, "ofport", p.OFPort)
	}
	if err == nil {
		err = c.Bundle(rctx, antispoof.FlowMods(p.Name, p.OFPort, rules))
	}
	if err != nil {
		k.forget(p.Bridge)
		log.Warn("cannot check or re-apply the port's anti-spoofing flows; trying again", logging.KeyErr, err)
		return false, false
	}
	log.Info("re-applied the port's anti-spoofing flows", "ofport", p.OFPort, "flowsFound", n, "flows", len(rules))
	return true, true
}

// rulesOf rebuilds the rules ADD made for p from its external_ids: a port an fstack-cni made
// before ports recorded their addresses gets back the MAC-only rules its ADD set.
func rulesOf(p port) ([]antispoof.Rule, error) {
	spec, legacy, err := antispoof.SpecFromIDs(p.IDs)
	if err != nil {
		return nil, err
	}
	return antispoof.RuleSet(p.Name, spec, legacy)
}

// dropDeleted removes the rules just applied to ports that are gone now: a DEL that removed its
// port and rules between the keeper's read and its write would otherwise leave them behind.
func (k *Keeper) dropDeleted(ctx context.Context, applied []port) {
	ports, _, err := k.list(ctx)
	if err != nil {
		return // the next pass re-reads; the port's own DEL or GC removes by cookie again
	}
	here := map[string]bool{}
	for _, p := range ports {
		here[p.Name] = true
	}
	for _, p := range applied {
		if here[p.Name] {
			continue
		}
		c, err := k.conn(ctx, p.Bridge)
		if err != nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		err = c.Bundle(rctx, antispoof.Removal(p.Name))
		cancel()
		k.Log.Info("removed the anti-spoofing flows of a port deleted meanwhile", logging.KeyPort, p.Name, "bridge", p.Bridge, logging.KeyErr, err)
	}
}

// conn is the bridge's OpenFlow connection, dialled when there is none (or it ended).
func (k *Keeper) conn(ctx context.Context, bridge string) (*openflow.Client, error) {
	if c := k.conns[bridge]; c != nil {
		select {
		case <-c.Done():
			k.forget(bridge)
		default:
			return c, nil
		}
	}
	if bridge == "" || bridge == "." || bridge == ".." || strings.ContainsRune(bridge, '/') {
		return nil, fmt.Errorf("bridge name %q cannot name a management socket", bridge)
	}
	dctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	c, err := openflow.Dial(dctx, filepath.Join(filepath.Dir(k.OVSDB), bridge+".mgmt"))
	if err != nil {
		return nil, err
	}
	if k.said["bridge/"+bridge] {
		k.Log.Info("bridge's ovs-vswitchd answers again; checking its ports' anti-spoofing flows", "bridge", bridge)
		k.clear("bridge/" + bridge)
	}
	k.conns[bridge] = c
	wake := k.wake
	go func() {
		<-c.Done()
		if wake != nil {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return c, nil
}

func (k *Keeper) forget(bridge string) {
	if c := k.conns[bridge]; c != nil {
		_ = c.Close()
		delete(k.conns, bridge)
	}
}

// closeUnused closes the connections of bridges that are gone or no longer netdev and have no
// fstack-cni port, and forgets what was said about ports that are gone.
func (k *Keeper) closeUnused(ports []port, bridges []string) {
	used := map[string]bool{}
	for _, b := range bridges {
		used[b] = true
	}
	for _, p := range ports {
		used[p.Bridge], used["mac/"+p.Name], used["misnumbered/"+p.Name] = true, true, true
	}
	for key := range k.said {
		if (strings.HasPrefix(key, "mac/") || strings.HasPrefix(key, "misnumbered/")) && !used[key] {
			k.clear(key)
		}
	}
	for b := range k.conns {
		if !used[b] {
			k.forget(b)
		}
	}
}

// list reads fstack-cni's ports, their bridges, ofports and MACs, and the netdev bridges (the
// only ones that take vhost-user ports), in one transaction.
func (k *Keeper) list(ctx context.Context) ([]port, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	c, err := ovsdb.Dial(ctx, k.OVSDB)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	ours := [][]any{ovsdb.Cond("external_ids", "includes", ovsdb.Map(map[string]string{antispoof.ExternalIDOwner: antispoof.Owner}))}
	res, err := c.Transact(ctx, "Open_vSwitch",
		ovsdb.Select("Bridge", nil, "name", "ports", "datapath_type"),
		ovsdb.Select("Port", ours, "_uuid", "name"),
		ovsdb.Select("Interface", ours, "name", "ofport", "ofport_request", "external_ids"))
	if err != nil {
		return nil, nil, fmt.Errorf("OVSDB at %s: %w", k.OVSDB, err)
	}
	bridgeOf, netdev, err := bridges(res[0].Rows)
	if err != nil {
		return nil, nil, err
	}
	portBridge, err := portBridges(res[1].Rows, bridgeOf)
	if err != nil {
		return nil, nil, err
	}
	var ports []port
	for _, row := range res[2].Rows {
		p, err := decode(row)
		if err != nil {
			return nil, nil, err
		}
		var ok bool
		if p.Bridge, ok = portBridge[p.Name]; ok { // fstack-cni names Port and Interface alike
			ports = append(ports, p)
		}
	}
	return ports, netdev, nil
}

// bridges reads the Bridge rows: the bridge of each Port UUID, and the netdev bridges.
func bridges(rows []ovsdb.Row) (bridgeOf map[string]string, netdev []string, err error) {
	bridgeOf = map[string]string{}
	for _, row := range rows {
		name, err := row.String("name")
		if err != nil {
			return nil, nil, err
		}
		if dt, err := row.String("datapath_type"); err == nil && dt == "netdev" {
			netdev = append(netdev, name)
		}
		ids, err := row.UUIDs("ports")
		if err != nil {
			return nil, nil, err
		}
		for _, id := range ids {
			bridgeOf[id] = name
		}
	}
	return bridgeOf, netdev, nil
}

// portBridges is the bridge of each of fstack-cni's Port rows, by port name.
func portBridges(rows []ovsdb.Row, bridgeOf map[string]string) (map[string]string, error) {
	portBridge := map[string]string{}
	for _, row := range rows {
		id, err := row.UUID("_uuid")
		if err != nil {
			return nil, err
		}
		name, err := row.String("name")
		if err != nil {
			return nil, err
		}
		if b, ok := bridgeOf[id]; ok {
			portBridge[name] = b
		}
	}
	return portBridge, nil
}

func decode(row ovsdb.Row) (port, error) {
	var p port
	var err error
	if p.Name, err = row.String("name"); err != nil {
		return p, err
	}
	n, set, err := row.OptionalInt("ofport")
	if err != nil {
		return p, err
	}
	if set && n > 0 && n < 0xff00 { // OpenFlow's physical port range
		p.OFPort = n
	}
	if _, selected := row["ofport_request"]; selected {
		if p.Requested, _, err = row.OptionalInt("ofport_request"); err != nil {
			return p, err
		}
	}
	ids, err := row.Map("external_ids")
	if err != nil {
		return p, err
	}
	p.IDs, p.Namespace, p.Pod = ids, ids[podcontract.OVSIDPodNamespace], ids[podcontract.OVSIDPodName]
	return p, nil
}

// once warns of a problem the first time it is seen since it last cleared.
func (k *Keeper) once(key, msg string, args ...any) {
	if k.said[key] {
		return
	}
	k.said[key] = true
	k.Log.Warn(msg, args...)
}

func (k *Keeper) clear(key string) { delete(k.said, key) }
