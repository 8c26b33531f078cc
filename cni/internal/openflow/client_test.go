package openflow

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// A flow mod's bytes, laid out by hand from OpenFlow 1.4 section 7.3.4.1: an add of a NORMAL
// rule matching in_port 7 and an EtherType, and a drop (no instruction). The node tier checks
// that OVS reads such messages as the ovs-ofctl rules they stand for.
func TestFlowModEncoding(t *testing.T) {
	add := FlowMod{Command: FlowAdd, Cookie: 0x0102030405060708, Priority: 40, Normal: true,
		Match: []OXM{{Field: FieldInPort, Value: U32(7)}, {Field: FieldEthType, Value: U16(0x0806)}}}
	want := "05 0e 0060 00000000" + // header: 1.4, FLOW_MOD, 96 bytes, xid 0
		"0102030405060708 0000000000000000" + // cookie, mask
		"00 00 0000 0000 0028 ffffffff ffffffff ffffffff 0000 0000" + // table 0, add, timeouts, prio 40, no buffer, any, any, flags, importance
		"0001 0012 8000 0004 00000007 8000 0a02 0806 000000000000" + // OXM match, 18 bytes, padded to 24
		"0004 0018 00000000 0000 0010 fffffffa 0000 000000000000" // apply actions: output NORMAL
	if got := hex.EncodeToString(add.Encode()); got != strings.ReplaceAll(want, " ", "") {
		t.Errorf("add:\n got %s\nwant %s", got, strings.ReplaceAll(want, " ", ""))
	}
	drop := FlowMod{Command: FlowDelete, Table: TableAll, Cookie: 9, CookieMask: ^uint64(0)}
	b := drop.Encode()
	if len(b) != 56 || b[8+16] != TableAll || b[8+17] != FlowDelete || binary.BigEndian.Uint16(b[2:]) != 56 {
		t.Errorf("delete by cookie: % x", b)
	}
}

// fakeBridge is the far end of a connection: it reads what the client sends and answers as
// script says.
type fakeBridge struct {
	conn net.Conn
	got  chan frame
}

func newFake(t *testing.T, hello []byte) (*Client, *fakeBridge) {
	t.Helper()
	a, b := net.Pipe()
	f := &fakeBridge{conn: b, got: make(chan frame, 64)}
	go func() {
		if _, err := readFrame(b); err != nil { // the client's HELLO
			return
		}
		_, _ = b.Write(hello)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := start(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
	go func() {
		for {
			fr, err := readFrame(b)
			if err != nil {
				close(f.got)
				return
			}
			f.got <- fr
		}
	}()
	return c, f
}

func helloWith(versions uint32) []byte {
	return message(TypeHello, 0, binary.BigEndian.AppendUint32([]byte{0, 1, 0, 8}, versions))
}

func (f *fakeBridge) next(t *testing.T) frame {
	t.Helper()
	select {
	case fr := <-f.got:
		return fr
	case <-time.After(10 * time.Second):
		t.Fatal("the client sent nothing")
		return frame{}
	}
}

// The bridge's version bitmap decides: one that allows 1.4 is taken, one without it is refused
// with the command that allows it.
func TestHello(t *testing.T) {
	newFake(t, helloWith(1<<4|1<<5|1<<6))
	for _, hello := range [][]byte{helloWith(1 << 4), message(TypeHello, 0, nil)[:8]} {
		hello[0] = 4 // a 1.3-only bridge
		a, b := net.Pipe()
		go func() { _, _ = readFrame(b); _, _ = b.Write(hello) }()
		_, err := start(context.Background(), a)
		if err == nil || !strings.Contains(err.Error(), "protocols=") {
			t.Errorf("HELLO % x: %v, want a refusal naming the bridge's protocols", hello, err)
		}
		_ = b.Close()
	}
}

// A bundle is opened, filled and committed under one id, each message with its own xid and the
// bundled flow mod carrying its bundle add's, all sent at once (one round trip); the commit's
// reply ends it, the open's reply on the way is passed over. Echo requests that arrive
// meanwhile are answered.
func TestBundle(t *testing.T) {
	c, f := newFake(t, helloWith(1<<5))
	mods := []FlowMod{{Command: FlowDelete, Table: TableAll, Cookie: 1, CookieMask: ^uint64(0)}, {Command: FlowAdd, Cookie: 1, Priority: 10}}
	errc := make(chan error, 1)
	go func() { errc <- c.Bundle(context.Background(), mods) }()
	open := f.next(t)
	if open.Type != TypeBundleControl || binary.BigEndian.Uint16(open.body[4:]) != bundleOpen {
		t.Fatalf("first message %+v, want a bundle open", open.header)
	}
	id := binary.BigEndian.Uint32(open.body)
	for i := range mods {
		add := f.next(t)
		inner := add.body[8:]
		if add.Type != TypeBundleAdd || binary.BigEndian.Uint32(add.body) != id || parseHeader(inner).XID != add.XID ||
			!bytes.Equal(inner[8:], mods[i].Encode()[8:]) {
			t.Errorf("bundle add %d: %+v % x", i, add.header, add.body)
		}
	}
	commit := f.next(t)
	if commit.Type != TypeBundleControl || binary.BigEndian.Uint16(commit.body[4:]) != bundleCommit || binary.BigEndian.Uint32(commit.body) != id {
		t.Fatalf("last message %+v % x, want the bundle's commit", commit.header, commit.body)
	}
	_, _ = f.conn.Write(message(TypeBundleControl, open.XID, append(binary.BigEndian.AppendUint32(nil, id), 0, bundleOpenReply, 0, bundleFlags)))
	_, _ = f.conn.Write(message(TypeEchoRequest, 77, []byte("hi")))
	if echo := f.next(t); echo.Type != TypeEchoReply || echo.XID != 77 || string(echo.body) != "hi" {
		t.Errorf("echo answered with %+v %q", echo.header, echo.body)
	}
	_, _ = f.conn.Write(message(TypeBundleControl, commit.XID, append(binary.BigEndian.AppendUint32(nil, id), 0, bundleCommitReply, 0, bundleFlags)))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	// An error reply to a bundled message fails the bundle with its type and code.
	go func() { errc <- c.Bundle(context.Background(), mods[:1]) }()
	open = f.next(t)
	add := f.next(t)
	_ = f.next(t) // commit
	_, _ = f.conn.Write(message(TypeError, add.XID, []byte{0, 5, 0, 2}))
	var oe *Error
	if err := <-errc; !errors.As(err, &oe) || oe.Type != 5 || oe.Code != 2 {
		t.Errorf("bundle with a refused flow mod: %v", err)
	}
}

// The flow count asks for the cookie under its mask and the match, and reads the aggregate
// reply's flow count; the connection's end fails a waiting request and closes Done.
func TestFlowCountAndClose(t *testing.T) {
	c, f := newFake(t, helloWith(1<<5))
	type result struct {
		n   uint32
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := c.FlowCount(context.Background(), TableAll, 5, ^uint64(0), []OXM{{Field: FieldInPort, Value: U32(3)}})
		res <- result{n, err}
	}()
	req := f.next(t)
	if req.Type != TypeMultipartReq || binary.BigEndian.Uint16(req.body) != multipartAggregate ||
		binary.BigEndian.Uint64(req.body[24:]) != 5 || binary.BigEndian.Uint64(req.body[32:]) != ^uint64(0) {
		t.Fatalf("request %+v % x", req.header, req.body)
	}
	body := binary.BigEndian.AppendUint16(nil, multipartAggregate)
	body = append(body, make([]byte, 6+16)...)
	body = binary.BigEndian.AppendUint32(body, 10)
	body = append(body, 0, 0, 0, 0)
	_, _ = f.conn.Write(message(TypeMultipartReply, req.XID+1, body)) // stale: not ours
	_, _ = f.conn.Write(message(TypeMultipartReply, req.XID, body))
	if r := <-res; r.err != nil || r.n != 10 {
		t.Fatalf("flow count %d, %v; want 10", r.n, r.err)
	}

	go func() {
		n, err := c.FlowCount(context.Background(), TableAll, 5, ^uint64(0), nil)
		res <- result{n, err}
	}()
	_ = f.next(t)
	_ = f.conn.Close()
	if r := <-res; !errors.Is(r.err, ErrClosed) {
		t.Errorf("request on a closed connection: %v", r.err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Error("Done not closed when the bridge went away")
	}
}
