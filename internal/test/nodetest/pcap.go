package nodetest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
)

// SYN is a TCP SYN (without ACK) read from a capture, and whether its TCP checksum is right.
type SYN struct {
	Src, Dst     netip.Addr
	DstPort      uint16
	Checksum     uint16
	ChecksumGood bool
}

// ReadSYNs returns every IPv4 TCP SYN in the classic pcap file at path (as DPDK's net_pcap
// writes it: Ethernet frames, either byte order, micro- or nanosecond stamps). Other frames
// are skipped; a truncated file is an error.
func ReadSYNs(path string) ([]SYN, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(raw) < 24 {
		return nil, fmt.Errorf("%s: %d bytes, shorter than a pcap header", path, len(raw))
	}
	var order binary.ByteOrder
	switch binary.LittleEndian.Uint32(raw) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		order = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		order = binary.BigEndian
	default:
		return nil, fmt.Errorf("%s: not a pcap file (magic %#x)", path, binary.LittleEndian.Uint32(raw))
	}
	if link := order.Uint32(raw[20:]); link != 1 {
		return nil, fmt.Errorf("%s: link type %d, want 1 (Ethernet)", path, link)
	}
	var out []SYN
	for rest := raw[24:]; len(rest) > 0; {
		if len(rest) < 16 {
			return nil, fmt.Errorf("%s: truncated record header", path)
		}
		n := int(order.Uint32(rest[8:]))
		if len(rest) < 16+n {
			return nil, fmt.Errorf("%s: truncated record of %d bytes", path, n)
		}
		if s, ok := parseSYN(rest[16 : 16+n]); ok {
			out = append(out, s)
		}
		rest = rest[16+n:]
	}
	return out, nil
}

// parseSYN reads an Ethernet frame; ok only for a whole IPv4 TCP SYN.
func parseSYN(f []byte) (SYN, bool) {
	if len(f) < 14+20 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return SYN{}, false
	}
	ip := f[14:]
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ip[0]>>4 != 4 || ip[9] != 6 || ihl < 20 || total > len(ip) || total < ihl+20 {
		return SYN{}, false
	}
	tcp := ip[ihl:total]
	if tcp[13]&0x12 != 0x02 { // SYN set, ACK clear
		return SYN{}, false
	}
	src, _ := netip.AddrFromSlice(ip[12:16])
	dst, _ := netip.AddrFromSlice(ip[16:20])
	return SYN{Src: src, Dst: dst, DstPort: binary.BigEndian.Uint16(tcp[2:]),
		Checksum: binary.BigEndian.Uint16(tcp[16:]), ChecksumGood: TCPChecksumValid(ip[12:16], ip[16:20], tcp)}, true
}

// TCPChecksumValid says whether segment (TCP header with its checksum, and payload) sums to
// all ones with the IPv4 pseudo-header (RFC 793, RFC 1071), as a receiver checks it.
func TCPChecksumValid(src, dst, segment []byte) bool {
	if len(src) != 4 || len(dst) != 4 || len(segment) < 20 {
		return false
	}
	var sum uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			sum += uint32(binary.BigEndian.Uint16(b))
			b = b[2:]
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	add(src)
	add(dst)
	sum += 6 + uint32(len(segment))
	add(segment)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}
