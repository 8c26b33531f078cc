// Package openflow speaks the few OpenFlow 1.4 messages fstack-cni and its flow keeper need to an
// OVS bridge's management socket: flow adds and deletes in an atomic bundle, and a flow count by
// cookie.
//
// The keeper runs in the CNI DaemonSet's image, which is empty but for our static binaries (no
// ovs-ofctl, no libraries it could link), and must put a port's rules back after ovs-vswitchd
// restarts; so the rules are encoded here, only the messages and match fields they use, and the
// plugin sends the same bytes at ADD rather than exec ovs-ofctl (faster, and one encoder:
// cni/internal/plugin/NOTES.md).
package openflow

import (
	"encoding/binary"
	"fmt"
)

// Version is OpenFlow 1.4, the first with bundles (which ovs-ofctl --bundle also uses). OVS
// bridges allow it unless their protocols column says otherwise.
const Version = 0x05

// Message types (OpenFlow 1.4, section 7.1).
const (
	TypeHello          = 0
	TypeError          = 1
	TypeEchoRequest    = 2
	TypeEchoReply      = 3
	TypeFlowMod        = 14
	TypeMultipartReq   = 18
	TypeMultipartReply = 19
	TypeBarrierRequest = 20
	TypeBarrierReply   = 21
	TypeBundleControl  = 33
	TypeBundleAdd      = 34
)

// Flow mod commands.
const (
	FlowAdd    = 0
	FlowDelete = 3
)

// Reserved numbers.
const (
	PortNormal uint32 = 0xfffffffa
	PortAny    uint32 = 0xffffffff
	GroupAny   uint32 = 0xffffffff
	TableAll   uint8  = 0xff
	NoBuffer   uint32 = 0xffffffff
)

const headerLen = 8

// header is every message's first 8 bytes.
type header struct {
	Version uint8
	Type    uint8
	Length  uint16
	XID     uint32
}

func parseHeader(b []byte) header {
	return header{Version: b[0], Type: b[1], Length: binary.BigEndian.Uint16(b[2:4]), XID: binary.BigEndian.Uint32(b[4:8])}
}

// message frames body as a message of type t.
func message(t uint8, xid uint32, body []byte) []byte {
	b := make([]byte, headerLen, headerLen+len(body))
	b[0], b[1] = Version, t
	binary.BigEndian.PutUint16(b[2:], uint16(headerLen+len(body)))
	binary.BigEndian.PutUint32(b[4:], xid)
	return append(b, body...)
}

// setXID rewrites a framed message's xid (a bundled message must carry its bundle add's).
func setXID(msg []byte, xid uint32) { binary.BigEndian.PutUint32(msg[4:8], xid) }

// OXM match fields of class OPENFLOW_BASIC (OpenFlow 1.4, section 7.2.3.7).
const (
	FieldInPort     = 0
	FieldEthSrc     = 4
	FieldEthType    = 5
	FieldVLANVID    = 6
	FieldIPProto    = 10
	FieldIPv4Src    = 11
	FieldARPSPA     = 22
	FieldARPSHA     = 24
	FieldIPv6Src    = 26
	FieldICMPv6Type = 29
	FieldICMPv6Code = 30
	FieldNDTarget   = 31
	FieldNDSLL      = 32
	FieldNDTLL      = 33
)

// VLANPresent is set in a VLAN_VID value that matches a tagged frame (OFPVID_PRESENT); a value
// of 0 exactly matches a frame without an 802.1Q header.
const VLANPresent = 0x1000

// OXM is one exact-match field. Prerequisites (the EtherType before an ARP field, and so on)
// are the caller's: a match lists them before the fields that need them.
type OXM struct {
	Field uint8
	Value []byte
}

func (o OXM) append(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, 0x8000)
	return append(append(b, o.Field<<1, uint8(len(o.Value))), o.Value...)
}

// U8, U16 and U32 are a field's value in network order.
func U8(v uint8) []byte   { return []byte{v} }
func U16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func U32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// appendMatch appends an ofp_match of type OXM, padded to 8 bytes.
func appendMatch(b []byte, fields []OXM) []byte {
	var oxm []byte
	for _, f := range fields {
		oxm = f.append(oxm)
	}
	b = binary.BigEndian.AppendUint16(b, 1) // OFPMT_OXM
	b = binary.BigEndian.AppendUint16(b, uint16(4+len(oxm)))
	b = append(b, oxm...)
	return append(b, make([]byte, pad8(4+len(oxm)))...)
}

func pad8(n int) int { return (8 - n%8) % 8 }

// FlowMod is one flow table change.
type FlowMod struct {
	Command    uint8
	Table      uint8
	Cookie     uint64
	CookieMask uint64 // for deletes: which cookie bits must equal Cookie's
	Priority   uint16
	Match      []OXM
	// Normal sends matched frames to OVS's NORMAL switching; false is no action, a drop.
	Normal bool
	// GotoTable, when not 0, continues matching in that table instead (Normal is then false).
	GotoTable uint8
}

// Encode frames the flow mod (xid 0; the client numbers what it sends).
func (f FlowMod) Encode() []byte {
	b := make([]byte, 0, 128)
	b = binary.BigEndian.AppendUint64(b, f.Cookie)
	b = binary.BigEndian.AppendUint64(b, f.CookieMask)
	b = append(b, f.Table, f.Command)
	b = binary.BigEndian.AppendUint16(b, 0) // idle timeout
	b = binary.BigEndian.AppendUint16(b, 0) // hard timeout
	b = binary.BigEndian.AppendUint16(b, f.Priority)
	b = binary.BigEndian.AppendUint32(b, NoBuffer)
	b = binary.BigEndian.AppendUint32(b, PortAny)  // out_port: deletes are not filtered by it
	b = binary.BigEndian.AppendUint32(b, GroupAny) // out_group: likewise
	b = binary.BigEndian.AppendUint16(b, 0)        // flags
	b = binary.BigEndian.AppendUint16(b, 0)        // importance
	b = appendMatch(b, f.Match)
	if f.Normal {
		b = binary.BigEndian.AppendUint16(b, 4)  // OFPIT_APPLY_ACTIONS
		b = binary.BigEndian.AppendUint16(b, 24) // its length with one output action
		b = append(b, 0, 0, 0, 0)
		b = binary.BigEndian.AppendUint16(b, 0)  // OFPAT_OUTPUT
		b = binary.BigEndian.AppendUint16(b, 16) // its length
		b = binary.BigEndian.AppendUint32(b, PortNormal)
		b = binary.BigEndian.AppendUint16(b, 0) // max_len: only for the controller port
		b = append(b, 0, 0, 0, 0, 0, 0)
	} else if f.GotoTable != 0 {
		b = binary.BigEndian.AppendUint16(b, 1) // OFPIT_GOTO_TABLE
		b = binary.BigEndian.AppendUint16(b, 8)
		b = append(b, f.GotoTable, 0, 0, 0)
	}
	return message(TypeFlowMod, 0, b)
}

// Bundle control types and flags (OpenFlow 1.4, section 7.3.9).
const (
	bundleOpen         = 0
	bundleOpenReply    = 1
	bundleCommit       = 4
	bundleCommitReply  = 5
	bundleAtomic       = 1
	bundleOrdered      = 2
	bundleFlags        = bundleAtomic | bundleOrdered
	multipartAggregate = 2
)

func bundleControl(xid, id uint32, typ uint16) []byte {
	b := binary.BigEndian.AppendUint32(nil, id)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, bundleFlags)
	return message(TypeBundleControl, xid, b)
}

func bundleAdd(xid, id uint32, msg []byte) []byte {
	inner := append([]byte(nil), msg...)
	setXID(inner, xid)
	b := binary.BigEndian.AppendUint32(nil, id)
	b = append(b, 0, 0) // pad
	b = binary.BigEndian.AppendUint16(b, bundleFlags)
	b = append(b, inner...)
	return message(TypeBundleAdd, xid, append(b, make([]byte, pad8(len(b)))...))
}

// aggregateRequest asks for the totals of table's flows whose cookie matches under mask and
// whose match is at least as specific as fields.
func aggregateRequest(xid uint32, table uint8, cookie, mask uint64, fields []OXM) []byte {
	b := binary.BigEndian.AppendUint16(nil, multipartAggregate)
	b = append(b, 0, 0, 0, 0, 0, 0) // flags, pad
	b = append(b, table, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, PortAny)
	b = binary.BigEndian.AppendUint32(b, GroupAny)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, cookie)
	b = binary.BigEndian.AppendUint64(b, mask)
	b = appendMatch(b, fields)
	return message(TypeMultipartReq, xid, b)
}

// parseAggregateReply returns the flow count of an aggregate multipart reply body.
func parseAggregateReply(body []byte) (uint32, error) {
	// type, flags, pad; then packet_count, byte_count, flow_count, pad
	if len(body) < 8+24 || binary.BigEndian.Uint16(body) != multipartAggregate {
		return 0, fmt.Errorf("openflow: malformed aggregate reply (%d bytes)", len(body))
	}
	return binary.BigEndian.Uint32(body[8+16:]), nil
}

// Error is an OFPT_ERROR reply.
type Error struct {
	Type, Code uint16
}

func (e *Error) Error() string {
	return fmt.Sprintf("openflow: bridge refused the request: error type %d code %d (OpenFlow 1.4 section 7.5.4)", e.Type, e.Code)
}

func parseError(body []byte) error {
	if len(body) < 4 {
		return fmt.Errorf("openflow: malformed error reply (%d bytes)", len(body))
	}
	return &Error{Type: binary.BigEndian.Uint16(body), Code: binary.BigEndian.Uint16(body[2:])}
}
