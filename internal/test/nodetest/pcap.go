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
	frames, err := ReadFrames(path)
	if err != nil {
		return nil, err
	}
	var out []SYN
	for _, f := range frames {
		if s, ok := parseSYN(f); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// ReadFrames returns every Ethernet frame of the classic pcap file at path (as DPDK's net_pcap
// and tcpdump write it: either byte order, micro- or nanosecond stamps); a truncated file is an
// error.
func ReadFrames(path string) ([][]byte, error) {
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
	var out [][]byte
	for rest := raw[24:]; len(rest) > 0; {
		if len(rest) < 16 {
			return nil, fmt.Errorf("%s: truncated record header", path)
		}
		n := int(order.Uint32(rest[8:]))
		if len(rest) < 16+n {
			return nil, fmt.Errorf("%s: truncated record of %d bytes", path, n)
		}
		out = append(out, rest[16:16+n])
		rest = rest[16+n:]
	}
	return out, nil
}

// WriteFrames writes frames as a classic little-endian pcap file of Ethernet frames, which
// DPDK's net_pcap replays (rx_pcap=).
func WriteFrames(path string, frames [][]byte) error {
	b := binary.LittleEndian.AppendUint32(nil, 0xa1b2c3d4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 4)
	b = append(b, make([]byte, 8)...) // zone, sigfigs
	b = binary.LittleEndian.AppendUint32(b, 65535)
	b = binary.LittleEndian.AppendUint32(b, 1)
	for _, f := range frames {
		b = append(b, make([]byte, 8)...) // timestamp
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return os.WriteFile(path, b, 0o644)
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
