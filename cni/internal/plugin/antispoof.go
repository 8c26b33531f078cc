package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/cni/internal/openflow"
	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
)

// Flows programs br-fstack's OpenFlow table. Without per-port rules the bridge's default NORMAL
// flow forwards anything a pod sends, so one pod could use another's MAC (and claim its
// addresses in ARP or IPv6 neighbour discovery).
type Flows interface {
	// Guard replaces every rule on g.OFPort with rules that pass only frames whose
	// source MAC is the port's (and whose ARP/ND link-layer address, when present, is the same),
	// whose ARP sender, IP source and ND target are the port's addresses, untagged or on the
	// port's VLANs, and drop the rest (antispoof.Rules).
	Guard(ctx context.Context, g *guard) error
	// Unguard removes the port's rules, found by their cookie. No rules, no bridge or no running
	// ovs-vswitchd (which keeps flows only in memory) is success.
	Unguard(ctx context.Context, g *guard) error
	// Check fails unless every one of the port's rules is on its ofport: after ovs-vswitchd
	// restarted they are gone until the flow keeper puts them back.
	Check(ctx context.Context, g *guard) error
}

// guard names one port's rules.
type guard struct {
	OVSDB  string // OVSDB's socket, to learn the port's ofport
	Bridge string
	Port   string
	Spec   antispoof.Spec
	// Legacy: the port was made by an fstack-cni whose rules bound the MAC alone.
	Legacy bool
	// OFPort is the number Guard puts the rules on: the one ADD requests for the port (which
	// may not exist yet), or the one ovs-vswitchd gave it.
	OFPort int64
}

// newGuard is the guard of a's port on the configured bridge.
func (c *command) newGuard(a *attachment) *guard {
	return &guard{OVSDB: c.conf.OVSDBSocket, Bridge: c.conf.Bridge, Port: a.PortName, Spec: a.Binding}
}

// guardOfPort is the guard of an existing port, from what its ADD recorded in its external_ids
// (as the flow keeper rebuilds its rules).
func (c *command) guardOfPort(name string, ids map[string]string) (*guard, error) {
	spec, legacy, err := antispoof.SpecFromIDs(ids)
	if err != nil {
		return nil, fmt.Errorf("port %s: %w", name, err)
	}
	return &guard{OVSDB: c.conf.OVSDBSocket, Bridge: c.conf.Bridge, Port: name, Spec: spec, Legacy: legacy}, nil
}

// ruleSet is the port's rules (see antispoof.RuleSet).
func (g *guard) ruleSet() ([]antispoof.Rule, error) {
	return antispoof.RuleSet(g.Port, g.Spec, g.Legacy)
}

// flowMods is the bundle that guards the port on ofport (see antispoof.FlowMods): the keeper
// sends the same after ovs-vswitchd restarts.
func (g *guard) flowMods(ofport int64) ([]openflow.FlowMod, error) {
	rules, err := g.ruleSet()
	if err != nil {
		return nil, err
	}
	return antispoof.FlowMods(g.Port, ofport, rules), nil
}

// mgmt is the bridge's OpenFlow management socket, which ovs-vswitchd makes beside OVSDB's in
// OVS's run directory.
func (g *guard) mgmt() string { return filepath.Join(filepath.Dir(g.OVSDB), g.Bridge+".mgmt") }

// cookie tags the port's rules (see antispoof.Cookie).
func (g *guard) cookie() uint64 { return antispoof.Cookie(g.Port) }

// openflowFlows speaks OpenFlow 1.4 to the bridge's management socket with the client the flow
// keeper uses, so ADD and the keeper send the same flow mods (antispoof.FlowMods) and nothing
// on the node but OVS itself is needed. make bench-cni chose it over exec'ing ovs-ofctl
// (cni/internal/plugin/NOTES.md: "One transport for the rules").
type openflowFlows struct {
	// OFPortWait bounds the wait for ovs-vswitchd to give a new port its ofport, in ms.
	OFPortWait int
}

// Guard puts the port's rules on g.OFPort in one atomic bundle that first removes its rules
// of an earlier ADD and whatever sits on the number, so the port is never without a guard
// once the bundle commits, and never with a stale one on a reused number. It does not wait for
// the port: ADD sends it before the port exists, while ovs-vswitchd has nothing else to do.
func (f openflowFlows) Guard(ctx context.Context, g *guard) error {
	ofport := g.OFPort
	if ofport <= 0 {
		return fmt.Errorf("anti-spoofing rules of port %s: no OpenFlow port number to put them on", g.Port)
	}
	mods, err := g.flowMods(ofport)
	if err != nil {
		return err
	}
	c, err := f.awaitBridge(ctx, g)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Bundle(ctx, mods); err != nil {
		return fmt.Errorf("anti-spoofing rules of port %s on ofport %d: %w", g.Port, ofport, err)
	}
	return nil
}

func (f openflowFlows) Unguard(ctx context.Context, g *guard) error {
	if _, err := os.Stat(g.mgmt()); errors.Is(err, fs.ErrNotExist) {
		return nil // no ovs-vswitchd for the bridge: its flows went with it
	}
	c, err := dialBridge(ctx, g)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Bundle(ctx, antispoof.Removal(g.Port)); err != nil {
		return fmt.Errorf("remove the anti-spoofing rules of port %s: %w", g.Port, err)
	}
	return nil
}

func (f openflowFlows) Check(ctx context.Context, g *guard) error {
	rules, err := g.ruleSet()
	if err != nil {
		return err
	}
	ofport, requested, err := f.ofport(ctx, g)
	if err != nil {
		return err
	}
	c, err := dialBridge(ctx, g)
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := c.FlowCount(ctx, openflow.TableAll, g.cookie(), ^uint64(0), antispoof.InPort(ofport))
	if err != nil {
		return fmt.Errorf("cannot check the anti-spoofing rules of port %s: %w", g.Port, err)
	}
	if int(n) != len(rules) && requested > 0 && requested != ofport {
		return fmt.Errorf("port %s requested OpenFlow port number %d but ovs-vswitchd gave it %d (another OVS client requested the same number?), and %d of its %d anti-spoofing rules are on %d: the CNI DaemonSet's flow keeper moves them (chart value cni.keepFlows.enabled), as does the node's next ADD", g.Port, requested, ofport, n, len(rules), ofport)
	}
	if int(n) != len(rules) {
		return fmt.Errorf("port %s has %d of its %d anti-spoofing rules on ofport %d (ovs-vswitchd restarted?): the CNI DaemonSet's flow keeper puts them back (chart value cni.keepFlows.enabled); see ovs-ofctl dump-flows unix:%s cookie=%#x/-1", g.Port, n, len(rules), ofport, g.mgmt(), g.cookie())
	}
	return nil
}

// awaitBridge dials the bridge, waiting up to OFPortWait while ovs-vswitchd is (re)starting: its
// management socket is missing or refuses until it has made the bridge, and an ADD then waits
// for it as it waited for the port's number before ADD chose it.
func (f openflowFlows) awaitBridge(ctx context.Context, g *guard) (*openflow.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(f.OFPortWait)*time.Millisecond)
	defer cancel()
	for {
		c, err := dialBridge(ctx, g)
		starting := errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)
		if !starting {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func dialBridge(ctx context.Context, g *guard) (*openflow.Client, error) {
	c, err := openflow.Dial(ctx, g.mgmt())
	if err != nil {
		return nil, fmt.Errorf("cannot reach bridge %s's ovs-vswitchd for port %s's anti-spoofing rules (is it running?): %w", g.Bridge, g.Port, err)
	}
	return c, nil
}

// ofport waits until ovs-vswitchd has numbered the port (it does so after the commit that made
// it) and returns the number and the one the port requested (0: none); -1 means ovs-vswitchd
// could not create it. Only CHECK waits so: ADD numbers its port itself (ofport.go).
func (f openflowFlows) ofport(ctx context.Context, g *guard) (n, requested int64, err error) {
	c, err := ovsdb.Dial(ctx, g.OVSDB)
	if err != nil {
		return 0, 0, fmt.Errorf("%w at %s: %w", errOVSDBUnreachable, g.OVSDB, err)
	}
	defer c.Close()
	unset := []map[string]any{{"ofport": ovsdb.Set()}}
	res, err := c.Transact(ctx, ovsDB,
		ovsdb.WaitUntilNot("Interface", nameIs(g.Port), []string{"ofport"}, unset, f.OFPortWait),
		ovsdb.Select("Interface", nameIs(g.Port), "name", "ofport", "ofport_request"))
	if err != nil {
		return 0, 0, fmt.Errorf("ovs-vswitchd gave port %s no OpenFlow port number (is it running?): %w", g.Port, err)
	}
	if len(res[1].Rows) == 0 {
		return 0, 0, fmt.Errorf("port %s vanished before its anti-spoofing rules were checked", g.Port)
	}
	num, err := decodeNumbered(res[1].Rows[0])
	if err == nil && num.ofport <= 0 {
		err = fmt.Errorf("ovs-vswitchd could not create port %s (ofport %d): see its Interface error column", g.Port, num.ofport)
	}
	return num.ofport, num.requested, err
}
