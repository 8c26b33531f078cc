package node

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// Issue 31 §2: a pod sends forged frames through OVS-DPDK from its own port, with its own MAC
// as the source: a gratuitous ARP claiming the network's gateway, an unsolicited neighbour
// advertisement claiming another address, IPv4 from a foreign source, a VLAN-tagged frame and
// a router advertisement. testpmd is the pod: it replays a pcap of those frames (net_pcap) into
// the pod's vhost-user port (io forwarding), interleaved with the frames the stack legitimately
// sends (ARP and IPv4 from its address and its VIP, an NA for its IPv6 VIP). A peer on the
// bridge captures what reaches it: every legitimate kind arrives, no forged one does, and the
// port's drop rules count the forged frames. The VIPs reach the plugin as a Multus networks
// entry's cni-args would (args.cni).
func TestForgedFramesFromThePodAreDropped(t *testing.T) {
	const copies = 8
	vip4, vip6 := netip.MustParseAddr("10.99.0.50"), netip.MustParseAddr("2001:db8::50")
	n, p := newNet(t, "1.1.0"), newPod(1107)
	n.extra = map[string]any{"args": map[string]any{"cni": map[string]any{
		podcontract.CNIArgsBinding: podcontract.PortBinding{Sources: []string{vip4.String(), vip6.String()}}}}}
	n.mustAdd(p)
	t.Cleanup(func() { n.mustDel(p); n.assertNothingLeft(); assertNoGuardRules(t) })
	info := podDevInfo(t, n, p)
	mac, _ := net.ParseMAC(info.MAC)
	peerIP := netip.MustParseAddr("10.99.0.204")
	peer := addVethPeer(t, peerIP.String()+"/24")
	kinds := forgedKinds(t, peer, peerIP, netip.MustParsePrefix(info.IPs[0]).Addr(), mac, vip4, vip6)
	var frames [][]byte
	for range copies {
		for _, k := range kinds {
			frames = append(frames, k.frame)
		}
	}
	dir := t.TempDir()
	replay := filepath.Join(dir, "forged.pcap")
	if err := nodetest.WriteFrames(replay, frames); err != nil {
		t.Fatal(err)
	}
	stopCapture := capturePeer(t, peer, dir)
	_, dropped0 := guardCounts(t)
	send := replayAsPod(t, filepath.Join(n.socketRoot(), p.uid), info, replay)
	waitConnected(t)
	send()
	seen := 0
	for range 300 { // until OVS has seen every frame the pod sent, or 30 s
		if seen = tableZeroPackets(t, ports(t)[0]); seen >= len(frames) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // let the last forwarded frames reach the capture before it stops
	counts := countKinds(t, stopCapture(), mac, kinds)
	_, dropped := guardCounts(t)
	report := assertVerdicts(t, kinds, counts, copies)
	forged := 5 * copies
	if dropped-dropped0 < forged {
		t.Errorf("the port's drop rules counted %d frames, want at least the %d forged ones\n%s", dropped-dropped0, forged, dumpFlows(t))
	}
	t.Logf("frames OVS saw from the pod's port: %d of %d sent; its drop rules counted %d\n%s", seen, len(frames), dropped-dropped0, strings.Join(report, "\n"))
}

// frameKind is one kind of frame the pod sends, legitimate or forged.
type frameKind struct {
	name   string
	forged bool
	frame  []byte
}

// forgedKinds are the frames the stack at own (with its VIPs) legitimately sends to peer, and
// the forged ones.
func forgedKinds(t *testing.T, peer *nodetest.Peer, peerIP, own netip.Addr, mac net.HardwareAddr, vip4, vip6 netip.Addr) []frameKind {
	t.Helper()
	peerMACText, err := nodetest.Run("ip", "netns", "exec", peer.Netns, "cat", "/sys/class/net/"+peer.Link+"/address")
	if err != nil {
		t.Fatal(err)
	}
	peerMAC, err := net.ParseMAC(strings.TrimSpace(peerMACText))
	if err != nil {
		t.Fatal(err)
	}
	gateway := netip.MustParseAddr("10.99.0.1")
	bcast, allNodes := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	ll := antispoof.LinkLocal(mac)
	ff02 := netip.MustParseAddr("ff02::1")
	return []frameKind{
		{"ARP for its address", false, eth(bcast, mac, 0, 0x0806, arpFrame(mac, own, own))},
		{"ARP for its VIP", false, eth(bcast, mac, 0, 0x0806, arpFrame(mac, vip4, vip4))},
		{"IPv4 from its address", false, eth(peerMAC, mac, 0, 0x0800, udp4(own, peerIP))},
		{"IPv4 from its VIP", false, eth(peerMAC, mac, 0, 0x0800, udp4(vip4, peerIP))},
		{"NA for its IPv6 VIP", false, eth(allNodes, mac, 0, 0x86dd, icmp6(vip6, ff02, na(vip6, mac)))},
		{"gratuitous ARP claiming the gateway", true, eth(bcast, mac, 0, 0x0806, arpFrame(mac, gateway, gateway))},
		{"unsolicited NA claiming another address", true, eth(allNodes, mac, 0, 0x86dd, icmp6(vip6, ff02, na(netip.MustParseAddr("2001:db8::1"), mac)))},
		{"IPv4 from a foreign source", true, eth(peerMAC, mac, 0, 0x0800, udp4(netip.MustParseAddr("10.99.0.77"), peerIP))},
		{"VLAN-tagged frame", true, eth(bcast, mac, 100, 0x0800, udp4(own, peerIP))},
		{"router advertisement", true, eth(allNodes, mac, 0, 0x86dd, icmp6(ll, ff02, ra(mac)))},
	}
}

// capturePeer starts tcpdump on the peer, capturing everything that reaches it, and waits until
// it listens; the returned stop ends it and gives the path of the capture.
func capturePeer(t *testing.T, peer *nodetest.Peer, dir string) (stop func() string) {
	t.Helper()
	capture := filepath.Join(dir, "peer.pcap")
	dump := exec.Command("ip", "netns", "exec", peer.Netns, "tcpdump", "-i", peer.Link, "-U", "-n", "-w", capture)
	dumpLog, err := os.Create(filepath.Join(dir, "tcpdump.log"))
	if err != nil {
		t.Fatal(err)
	}
	dump.Stdout, dump.Stderr = dumpLog, dumpLog
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	stopDump := func() { _ = dump.Process.Signal(syscall.SIGINT); _ = dump.Wait() }
	t.Cleanup(stopDump)
	for range 100 { // a bound on a wait: tcpdump writes the header once it listens
		if st, err := os.Stat(capture); err == nil && st.Size() >= 24 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return func() string { stopDump(); return capture }
}

// countKinds counts the frames of each kind from mac in the capture.
func countKinds(t *testing.T, capture string, mac net.HardwareAddr, kinds []frameKind) map[string]int {
	t.Helper()
	got, err := nodetest.ReadFrames(capture)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, f := range got {
		if k := kindOf(f, mac, kinds); k != "" {
			counts[k]++
		}
	}
	return counts
}

// assertVerdicts asserts that every legitimate kind reached the peer and no forged one did,
// and returns what reached it, one line per kind.
func assertVerdicts(t *testing.T, kinds []frameKind, counts map[string]int, copies int) []string {
	t.Helper()
	var report []string
	for _, k := range kinds {
		report = append(report, fmt.Sprintf("%-42s sent %d, reached the peer %d", k.name, copies, counts[k.name]))
		switch {
		case k.forged && counts[k.name] != 0:
			t.Errorf("%s: %d of %d reached the peer, want none", k.name, counts[k.name], copies)
		case !k.forged && counts[k.name] == 0:
			t.Errorf("%s: none of %d reached the peer, want them passed", k.name, copies)
		}
	}
	return report
}

// replayAsPod starts testpmd as the pod's vhost-user server with a second port, net_pcap
// reading replay, and io forwarding, so the frames of replay go out of the pod's port; it
// waits at its prompt, and the returned send starts forwarding (once OVS has connected, so no
// frame meets a link that is down). --no-flush-rx: testpmd otherwise drains every rx queue
// before it forwards, which reads the whole file into nowhere.
func replayAsPod(t *testing.T, podDir string, info *podcontract.DevInfo, replay string) (send func()) {
	t.Helper()
	prefix := fmt.Sprintf("fsktr%d", os.Getpid())
	cmd, stdin, logPath := podTestpmd(t, podDir, info, prefix, []string{"--vdev=net_pcap0,rx_pcap=" + replay + ",tx_pcap=/dev/null"},
		[]string{"-i", "--no-flush-rx", "--forward-mode=io"})
	t.Cleanup(func() {
		_, _ = stdin.Write([]byte("quit\n"))
		stopTestpmd(t, cmd, stdin, logPath, prefix)
	})
	return func() {
		if _, err := stdin.Write([]byte("start\n")); err != nil {
			t.Fatal(err)
		}
	}
}

var tableOf = regexp.MustCompile(`table=(\d+)`)

// tableZeroPackets sums the packets of the port's table-0 rules, which every frame from the
// port meets exactly once.
func tableZeroPackets(t *testing.T, port string) int {
	t.Helper()
	cookie := fmt.Sprintf("cookie=%#x,", antispoof.Cookie(port))
	sum := 0
	for _, l := range strings.Split(dumpFlows(t), "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, cookie) {
			continue
		}
		if m := tableOf.FindStringSubmatch(l); m != nil && m[1] != "0" {
			continue
		}
		if m := nPackets.FindStringSubmatch(l); m != nil {
			k, _ := strconv.Atoi(m[1])
			sum += k
		}
	}
	return sum
}

// kindOf names which of kinds f is (by its bytes past the source MAC), or "".
func kindOf(f []byte, src net.HardwareAddr, kinds []frameKind) string {
	if len(f) < 14 || !slices.Equal(f[6:12], src) {
		return ""
	}
	for _, k := range kinds {
		// The peer's capture may pad a short frame: compare the frame's length of bytes.
		if len(f) >= len(k.frame) && slices.Equal(f[:len(k.frame)], k.frame) {
			return k.name
		}
	}
	return ""
}

func eth(dst, src net.HardwareAddr, vlan int, etype uint16, payload []byte) []byte {
	b := append(append([]byte{}, dst...), src...)
	if vlan != 0 {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, uint16(vlan))
	}
	b = binary.BigEndian.AppendUint16(b, etype)
	b = append(b, payload...)
	for len(b) < 60 {
		b = append(b, 0)
	}
	return b
}

// arpFrame is an ARP request from sha/spa for tpa (a gratuitous one when tpa is spa).
func arpFrame(sha net.HardwareAddr, spa, tpa netip.Addr) []byte {
	b := []byte{0, 1, 8, 0, 6, 4, 0, 1}
	b = append(b, sha...)
	b = append(b, spa.AsSlice()...)
	b = append(b, make([]byte, 6)...)
	return append(b, tpa.AsSlice()...)
}

func udp4(src, dst netip.Addr) []byte {
	payload := []byte("kube-fstack antispoof test")
	u := binary.BigEndian.AppendUint16(nil, 40000)
	u = binary.BigEndian.AppendUint16(u, 9)
	u = binary.BigEndian.AppendUint16(u, uint16(8+len(payload)))
	u = append(binary.BigEndian.AppendUint16(u, 0), payload...)
	h := []byte{0x45, 0}
	h = binary.BigEndian.AppendUint16(h, uint16(20+len(u)))
	h = append(h, 0, 1, 0x40, 0, 64, 17, 0, 0)
	h = append(append(h, src.AsSlice()...), dst.AsSlice()...)
	binary.BigEndian.PutUint16(h[10:], checksum(h))
	return append(h, u...)
}

// icmp6 is an IPv6 packet (hop limit 255, as neighbour discovery requires) carrying msg, whose
// checksum it fills in.
func icmp6(src, dst netip.Addr, msg []byte) []byte {
	s, d := src.As16(), dst.As16()
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, 0)
	pseudo = binary.BigEndian.AppendUint16(pseudo, uint16(len(msg)))
	pseudo = append(pseudo, 0, 0, 0, 58)
	binary.BigEndian.PutUint16(msg[2:], checksum(append(pseudo, msg...)))
	h := []byte{0x60, 0, 0, 0}
	h = binary.BigEndian.AppendUint16(h, uint16(len(msg)))
	h = append(h, 58, 255)
	h = append(append(h, s[:]...), d[:]...)
	return append(h, msg...)
}

// na is an unsolicited, overriding neighbour advertisement of target with the target
// link-layer address option.
func na(target netip.Addr, mac net.HardwareAddr) []byte {
	t := target.As16()
	b := []byte{136, 0, 0, 0, 0x20, 0, 0, 0}
	b = append(b, t[:]...)
	return append(append(b, 2, 1), mac...)
}

// ra is a router advertisement offering to be the default router, with its source
// link-layer address.
func ra(mac net.HardwareAddr) []byte {
	b := []byte{134, 0, 0, 0, 64, 0, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0}
	return append(append(b, 1, 1), mac...)
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
