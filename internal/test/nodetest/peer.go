package nodetest

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
)

// Peer is a host on an OVS bridge: a veth whose one end is a port of the bridge, in
// ovs-vswitchd's network namespace, and whose other end, with an address, is in a namespace of
// its own. The CNI node tests, the dataplane tests and the e2e suite ping a vhost-user port
// from one. It is made by hack/lib/kernel-sender.sh, as the local cluster's node address is, so
// its tx checksum offload is off: TCP from it reaches F-Stack with valid checksums.
type Peer struct {
	Netns    string // the peer's namespace
	Link     string // the sender: the veth end in Netns, with the address
	ovsNetns string
	ovsEnd   string
	bridge   string
	vsctl    func(args ...string) (string, error)
}

// AttachPeer makes a Peer: namespace ns, veth ends link+"o" (on bridge) and link+"p" (with
// addr, e.g. 10.99.0.99/24; the sender, Peer.Link). vsctl runs ovs-vsctl against the instance; ovsNetns "" is the
// host's namespace. Leftovers of an earlier run with the same names are removed first.
func AttachPeer(vsctl func(args ...string) (string, error), ovsNetns, bridge, ns, link, addr string) (*Peer, error) {
	p := &Peer{Netns: ns, Link: link + "p", ovsNetns: ovsNetns, ovsEnd: link + "o", bridge: bridge, vsctl: vsctl}
	p.Close()
	if err := AddNetns(ns); err != nil {
		return nil, err
	}
	portNetns := ovsNetns
	if portNetns == "" {
		portNetns = "-"
	}
	if _, err := Run(KernelSenderScript(), p.ovsEnd, portNetns, p.Link, ns, addr); err != nil {
		p.Close()
		return nil, err
	}
	if _, err := vsctl("--timeout=30", "add-port", bridge, p.ovsEnd); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// KernelSenderScript is hack/lib/kernel-sender.sh of this source tree: the tests make their
// senders exactly as the local cluster makes the node's.
func KernelSenderScript() string {
	_, file, _, _ := runtime.Caller(0) // internal/test/nodetest/peer.go
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "hack", "lib", "kernel-sender.sh")
}

func (p *Peer) ovsIP(args ...string) []string {
	if p.ovsNetns == "" {
		return append([]string{"ip"}, args...)
	}
	return append([]string{"ip", "-n", p.ovsNetns}, args...)
}

// Close removes the port, the veth and the namespace; missing pieces are fine.
func (p *Peer) Close() {
	_, _ = p.vsctl("--timeout=30", "--if-exists", "del-port", p.bridge, p.ovsEnd)
	del := p.ovsIP("link", "del", p.ovsEnd)
	_, _ = Run(del[0], del[1:]...)
	DelNetns(p.Netns)
}

// Ping waits for a first reply from ip (a bounded number of tries while ports come up and ARP
// resolves), then wants a burst of 3 pings with 3 replies within the given number of bursts.
// It returns the summary of the good burst.
func (p *Peer) Ping(ip string, bursts int) (string, error) {
	var out string
	var err error
	for range 30 {
		if out, err = Run("ip", "netns", "exec", p.Netns, "ping", "-c", "1", "-W", "1", ip); err == nil {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("no reply from %s after 30 pings: %w\n%s", ip, err, out)
	}
	for range bursts {
		out, err = Run("ip", "netns", "exec", p.Netns, "ping", "-c", "3", "-i", "0.2", "-W", "2", ip)
		if err == nil && strings.Contains(out, " 3 received") {
			return strings.TrimSpace(out[strings.LastIndex(out, "---"):]), nil
		}
	}
	return "", fmt.Errorf("ping %s: no burst of 3 got 3 replies in %d tries; the last:\n%s", ip, bursts, out)
}
