package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/cni/internal/openflow"
	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
)

// Flows programs br-fstack's OpenFlow table. Without per-port rules the bridge's default NORMAL
// flow forwards anything a pod sends, so one pod could use another's MAC (and claim its
// addresses in ARP or IPv6 neighbour discovery).
type Flows interface {
	// Guard replaces every rule on the port's ofport with rules that pass only frames whose
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

// ruleSet is the port's rules (see antispoof.Rules).
func (g *guard) ruleSet() ([]antispoof.Rule, error) {
	if g.Legacy {
		return antispoof.LegacyRules(g.Port, g.Spec.MAC)
	}
	return antispoof.Rules(g.Port, g.Spec)
}

// mgmt is the bridge's OpenFlow management socket, which ovs-vswitchd makes beside OVSDB's in
// OVS's run directory.
func (g *guard) mgmt() string { return filepath.Join(filepath.Dir(g.OVSDB), g.Bridge+".mgmt") }

// cookie tags the port's rules (see antispoof.Cookie).
func (g *guard) cookie() uint64 { return antispoof.Cookie(g.Port) }

// rules is the ovs-ofctl add-flows input for the port (see antispoof.Ofctl): the keeper puts
// the same list back after ovs-vswitchd restarts.
func (g *guard) rules(ofport int64) (string, error) {
	rules, err := g.ruleSet()
	if err != nil {
		return "", err
	}
	return antispoof.Ofctl(g.Port, ofport, rules), nil
}

// ofctlFlows drives ovs-ofctl against the bridge's management socket. ovs-ofctl ships with
// every OVS (openvswitch-common), speaks whichever OpenFlow version the bridge allows, encodes
// the Nicira extensions the ARP/ND matches need, and leaves rules an admin can read with
// dump-flows; speaking OpenFlow here would be a second encoder of all that to keep right.
type ofctlFlows struct {
	// Ofctl is the ovs-ofctl to run; "" looks it up in PATH, then in the usual places.
	Ofctl string
	// OFPortWait bounds the wait for ovs-vswitchd to give a new port its ofport, in ms.
	OFPortWait int
}

func (f ofctlFlows) Guard(ctx context.Context, g *guard) error {
	ofport, err := f.ofport(ctx, g)
	if err != nil {
		return err
	}
	rules, err := g.rules(ofport)
	if err != nil {
		return err
	}
	return f.run(ctx, strings.NewReader(rules), "--bundle", "add-flows", "unix:"+g.mgmt(), "-")
}

func (f ofctlFlows) Unguard(ctx context.Context, g *guard) error {
	if _, err := os.Stat(g.mgmt()); errors.Is(err, fs.ErrNotExist) {
		return nil // no ovs-vswitchd for the bridge: its flows went with it
	}
	return f.run(ctx, nil, "del-flows", "unix:"+g.mgmt(), fmt.Sprintf("cookie=%#x/-1", g.cookie()))
}

func (f ofctlFlows) Check(ctx context.Context, g *guard) error {
	rules, err := g.ruleSet()
	if err != nil {
		return err
	}
	ofport, err := f.ofport(ctx, g)
	if err != nil {
		return err
	}
	c, err := openflow.Dial(ctx, g.mgmt())
	if err != nil {
		return fmt.Errorf("cannot check the anti-spoofing rules of port %s (is ovs-vswitchd running?): %w", g.Port, err)
	}
	defer c.Close()
	n, err := c.FlowCount(ctx, openflow.TableAll, g.cookie(), ^uint64(0), antispoof.InPort(ofport))
	if err != nil {
		return fmt.Errorf("cannot check the anti-spoofing rules of port %s: %w", g.Port, err)
	}
	if int(n) != len(rules) {
		return fmt.Errorf("port %s has %d of its %d anti-spoofing rules on ofport %d (ovs-vswitchd restarted?): the CNI DaemonSet's flow keeper puts them back (chart value cni.keepFlows.enabled); see ovs-ofctl dump-flows unix:%s cookie=%#x/-1", g.Port, n, len(rules), ofport, g.mgmt(), g.cookie())
	}
	return nil
}

// ofport waits until ovs-vswitchd has numbered the port (it does so after the commit that made
// it) and returns the number; -1 means ovs-vswitchd could not create it.
func (f ofctlFlows) ofport(ctx context.Context, g *guard) (int64, error) {
	c, err := ovsdb.Dial(ctx, g.OVSDB)
	if err != nil {
		return 0, fmt.Errorf("%w at %s: %w", errOVSDBUnreachable, g.OVSDB, err)
	}
	defer c.Close()
	unset := []map[string]any{{"ofport": ovsdb.Set()}}
	res, err := c.Transact(ctx, ovsDB,
		ovsdb.WaitUntilNot("Interface", nameIs(g.Port), []string{"ofport"}, unset, f.OFPortWait),
		ovsdb.Select("Interface", nameIs(g.Port), "ofport"))
	if err != nil {
		return 0, fmt.Errorf("ovs-vswitchd gave port %s no OpenFlow port number (is it running?): %w", g.Port, err)
	}
	if len(res[1].Rows) == 0 {
		return 0, fmt.Errorf("port %s vanished before its anti-spoofing rules were set", g.Port)
	}
	n, _, err := res[1].Rows[0].OptionalInt("ofport")
	if err == nil && n <= 0 {
		err = fmt.Errorf("ovs-vswitchd could not create port %s (ofport %d): see its Interface error column", g.Port, n)
	}
	return n, err
}

func (f ofctlFlows) run(ctx context.Context, stdin *strings.Reader, args ...string) error {
	bin, err := f.binary()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// binary finds ovs-ofctl: a runtime may exec the plugin with a short PATH.
func (f ofctlFlows) binary() (string, error) {
	if f.Ofctl != "" {
		return f.Ofctl, nil
	}
	if p, err := exec.LookPath("ovs-ofctl"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/ovs-ofctl", "/usr/local/bin/ovs-ofctl", "/usr/sbin/ovs-ofctl"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("ovs-ofctl not found (in PATH, /usr/bin, /usr/local/bin, /usr/sbin): install OVS's tools (openvswitch-common) on the node; the plugin needs it to stop pods from sending with another pod's MAC")
}
