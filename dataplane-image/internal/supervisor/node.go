package supervisor

import (
	"bufio"
	"encoding/hex"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
)

// The kubelet probes a pod from the node's network namespace, so its connections come from one
// of two addresses: on bridge CNIs the bridge's address, which is the pod's default gateway; on
// routed CNIs (the host end of the pod's veth has no address) the node's own address, which the
// downward API gives as status.hostIPs. Nothing else needs /app-probe, which makes the app do
// work (a connection through F-Stack per call), so it answers those addresses only.

// maxRouteTable bounds the route table read: a pod's has a handful of lines.
const maxRouteTable = 1 << 20

// nodeAddrs are the addresses the kubelet's probes may come from: the node's (Config.NodeIPs)
// and the pod's default gateways. Read at each call: both are fixed for the pod's life, and the
// route table is a small in-kernel file.
func (s *Supervisor) nodeAddrs() []netip.Addr {
	var addrs []netip.Addr
	for f := range strings.FieldsFuncSeq(s.Cfg.NodeIPs, func(r rune) bool { return r == ',' || r == ' ' }) {
		if a, err := netip.ParseAddr(f); err == nil {
			addrs = append(addrs, a.Unmap())
		}
	}
	addrs = append(addrs, defaultGatewaysV4(s.Cfg.Paths.RouteV4)...)
	return append(addrs, defaultGatewaysV6(s.Cfg.Paths.RouteV6)...)
}

// fromNode reports whether remote (a RemoteAddr, host:port) is one of the node's addresses.
func (s *Supervisor) fromNode(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap().WithZone("")
	for _, n := range s.nodeAddrs() {
		if n == a {
			return true
		}
	}
	return false
}

// routeLines returns the fields of each line of a /proc/net route table, bounded.
func routeLines(path string) [][]string {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(io.LimitReader(f, maxRouteTable))
	for sc.Scan() {
		out = append(out, strings.Fields(sc.Text()))
	}
	return out
}

// defaultGatewaysV4 reads /proc/net/route: Iface Destination Gateway Flags ... Mask, addresses
// as 8 hex digits in host (little-endian) order.
func defaultGatewaysV4(path string) []netip.Addr {
	var out []netip.Addr
	for _, f := range routeLines(path) {
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		b, err := hex.DecodeString(f[2])
		if err != nil || len(b) != 4 {
			continue
		}
		if a := netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]}); !a.IsUnspecified() {
			out = append(out, a)
		}
	}
	return out
}

// defaultGatewaysV6 reads /proc/net/ipv6_route: destination, its prefix length, source, its
// prefix length, next hop, ... with addresses as 32 hex digits in network order.
func defaultGatewaysV6(path string) []netip.Addr {
	var out []netip.Addr
	for _, f := range routeLines(path) {
		if len(f) < 5 || f[0] != strings.Repeat("0", 32) || f[1] != "00" {
			continue
		}
		b, err := hex.DecodeString(f[4])
		if err != nil || len(b) != net.IPv6len {
			continue
		}
		if a := netip.AddrFrom16([16]byte(b)); !a.IsUnspecified() {
			out = append(out, a)
		}
	}
	return out
}
