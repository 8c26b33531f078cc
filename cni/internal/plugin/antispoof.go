package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
)

// Flows programs br-fstack's OpenFlow table. Without per-port rules the bridge's default NORMAL
// flow forwards anything a pod sends, so one pod could use another's MAC (and claim its
// addresses in ARP or IPv6 neighbour discovery).
type Flows interface {
	// Guard replaces every rule on the port's ofport with rules that pass only frames whose
	// source MAC is the port's (and whose ARP/ND link-layer address, when present, is the same)
	// and drop the rest.
	Guard(ctx context.Context, g *guard) error
	// Unguard removes the port's rules, found by their cookie. No rules, no bridge or no running
	// ovs-vswitchd (which keeps flows only in memory) is success.
	Unguard(ctx context.Context, g *guard) error
}

// guard names one port's rules.
type guard struct {
	OVSDB  string // OVSDB's socket, to learn the port's ofport
	Bridge string
	Port   string
	MAC    string
}

// newGuard is the guard of a's port on the configured bridge.
func (c *command) newGuard(a *attachment) *guard {
	return &guard{OVSDB: c.conf.OVSDBSocket, Bridge: c.conf.Bridge, Port: a.PortName, MAC: a.MAC}
}

// mgmt is the bridge's OpenFlow management socket, which ovs-vswitchd makes beside OVSDB's in
// OVS's run directory.
func (g *guard) mgmt() string { return filepath.Join(filepath.Dir(g.OVSDB), g.Bridge+".mgmt") }

// cookie tags the port's rules, so removal is exact (no other rule has it) and idempotent, and
// a port name's rules are found without its ofport, which OVS may give to another port later.
// The top bit stays clear: an all-ones cookie is reserved in OpenFlow 1.3+.
func (g *guard) cookie() uint64 {
	s := sha256.Sum256([]byte("kube-fstack.io/flows/" + g.Port))
	return binary.BigEndian.Uint64(s[:8]) &^ (1 << 63)
}

// Priorities above the bridge's default NORMAL flow (0): ARP and ND must carry the port's MAC
// inside too, everything else needs only the source MAC; the rest of the port's frames drop.
const (
	prioLinkLayerOK = 40
	prioLinkLayer   = 30
	prioSourceOK    = 20
	prioDrop        = 10
)

// rules is the ovs-ofctl add-flows input for the port: first the removal of its own rules from
// an earlier ADD (whose port may have had another ofport) and of whatever a collected port left
// on this ofport, then the port's rules.
func (g *guard) rules(ofport int64) (string, error) {
	hw, err := net.ParseMAC(g.MAC)
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("anti-spoofing rules for port %s: MAC %q is not an Ethernet address", g.Port, g.MAC)
	}
	mac, none := hw.String(), "00:00:00:00:00:00"
	head := fmt.Sprintf("cookie=%#x,table=0,in_port=%d", g.cookie(), ofport)
	own := head + ",dl_src=" + mac
	nsol, nadv := "icmp6,icmp_type=135,icmp_code=0", "icmp6,icmp_type=136,icmp_code=0"
	lines := []string{
		fmt.Sprintf("delete cookie=%#x/-1", g.cookie()),
		fmt.Sprintf("delete in_port=%d", ofport),
		fmt.Sprintf("add %s,priority=%d,arp,arp_sha=%s,actions=NORMAL", own, prioLinkLayerOK, mac),
		// ND options are optional: an absent one reads as all zeros.
		fmt.Sprintf("add %s,priority=%d,%s,nd_sll=%s,actions=NORMAL", own, prioLinkLayerOK, nsol, mac),
		fmt.Sprintf("add %s,priority=%d,%s,nd_sll=%s,actions=NORMAL", own, prioLinkLayerOK, nsol, none),
		fmt.Sprintf("add %s,priority=%d,%s,nd_tll=%s,actions=NORMAL", own, prioLinkLayerOK, nadv, mac),
		fmt.Sprintf("add %s,priority=%d,%s,nd_tll=%s,actions=NORMAL", own, prioLinkLayerOK, nadv, none),
		fmt.Sprintf("add %s,priority=%d,arp,actions=drop", head, prioLinkLayer),
		fmt.Sprintf("add %s,priority=%d,%s,actions=drop", head, prioLinkLayer, nsol),
		fmt.Sprintf("add %s,priority=%d,%s,actions=drop", head, prioLinkLayer, nadv),
		fmt.Sprintf("add %s,priority=%d,actions=NORMAL", own, prioSourceOK),
		fmt.Sprintf("add %s,priority=%d,actions=drop", head, prioDrop),
	}
	return strings.Join(lines, "\n") + "\n", nil
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
