package openflow

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ErrClosed is returned for requests on a connection that has ended; the bridge's
// ovs-vswitchd going away ends it.
var ErrClosed = errors.New("openflow: connection closed")

// Client is one OpenFlow 1.4 connection to a bridge. It is held open for as long as
// ovs-vswitchd runs: Done tells the holder the moment it stops. Requests go one at a time.
type Client struct {
	conn net.Conn

	wmu sync.Mutex // one writer at a time: requests and the reader's echo replies
	omu sync.Mutex // one request at a time, so the replies in in are its own or stale
	in  chan frame
	xid uint32 // under omu

	done chan struct{}
	err  error // why done closed; set before
}

type frame struct {
	header
	body []byte
}

// Dial connects to a bridge's management socket (<OVS run dir>/<bridge>.mgmt) and agrees on
// OpenFlow 1.4 with it.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("openflow: dial %s: %w", path, err)
	}
	c, err := start(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("openflow: %s: %w", path, err)
	}
	return c, nil
}

// start agrees on the version over an established connection and starts reading it.
func start(ctx context.Context, conn net.Conn) (*Client, error) {
	c := &Client{conn: conn, in: make(chan frame, 64), done: make(chan struct{}), xid: 1}
	if err := c.hello(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	go c.read()
	return c, nil
}

// hello sends our HELLO, which offers only 1.4 in its version bitmap, and reads the bridge's.
func (c *Client) hello(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.conn.SetDeadline(dl)
		defer func() { _ = c.conn.SetDeadline(time.Time{}) }()
	}
	bitmap := []byte{0, 1, 0, 8} // OFPHET_VERSIONBITMAP, length 8
	bitmap = binary.BigEndian.AppendUint32(bitmap, 1<<Version)
	if _, err := c.conn.Write(message(TypeHello, 0, bitmap)); err != nil {
		return err
	}
	f, err := readFrame(c.conn)
	if err != nil {
		return fmt.Errorf("no HELLO from the bridge: %w", err)
	}
	switch {
	case f.Type == TypeError:
		return fmt.Errorf("the bridge refused OpenFlow 1.4 (%w): allow it, e.g. ovs-vsctl set bridge <bridge> protocols=OpenFlow13,OpenFlow14", parseError(f.body))
	case f.Type != TypeHello:
		return fmt.Errorf("first message from the bridge has type %d, want HELLO", f.Type)
	case !offers(f, Version):
		return fmt.Errorf("the bridge does not offer OpenFlow 1.4 (its HELLO has version %d): allow it, e.g. ovs-vsctl set bridge <bridge> protocols=OpenFlow13,OpenFlow14", f.Version)
	}
	return nil
}

// offers tells whether a HELLO allows version v: by its version bitmap when it has one, else by
// its header's version, the highest it speaks.
func offers(f frame, v uint8) bool {
	for b := f.body; len(b) >= 4; {
		typ, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if n < 4 || n > len(b) {
			break
		}
		if typ == 1 && n >= 8 && v < 32 {
			return binary.BigEndian.Uint32(b[4:])&(1<<v) != 0
		}
		b = b[min(len(b), n+pad8(n)):]
	}
	return f.Version >= v
}

func readFrame(r io.Reader) (frame, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	f := frame{header: parseHeader(h[:])}
	if f.Length < headerLen {
		return frame{}, fmt.Errorf("openflow: message length %d is shorter than its header", f.Length)
	}
	f.body = make([]byte, int(f.Length)-headerLen)
	_, err := io.ReadFull(r, f.body)
	return f, err
}

// read answers the bridge's echo requests and hands everything else to the request waiting,
// until the connection ends. Messages nobody waits for (stale replies, port status) are
// dropped when the queue is full rather than stall the echo replies.
func (c *Client) read() {
	for {
		f, err := readFrame(c.conn)
		if err != nil {
			c.err = fmt.Errorf("%w: %w", ErrClosed, err)
			close(c.done)
			return
		}
		if f.Type == TypeEchoRequest {
			_ = c.write(message(TypeEchoReply, f.XID, f.body))
			continue
		}
		select {
		case c.in <- f:
		default:
		}
	}
}

func (c *Client) write(msgs ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	for _, m := range msgs {
		if _, err := c.conn.Write(m); err != nil {
			return fmt.Errorf("openflow: send: %w", err)
		}
	}
	return nil
}

// Done is closed when the connection ends (ovs-vswitchd exited, or Close).
func (c *Client) Done() <-chan struct{} { return c.done }

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }

// begin takes the request lock, drops replies left from an abandoned request and returns the
// first of n fresh xids.
func (c *Client) begin(n uint32) uint32 {
	c.omu.Lock()
	for {
		select {
		case <-c.in:
			continue
		default:
		}
		break
	}
	x := c.xid
	c.xid += n
	if c.xid < x { // wrapped
		x, c.xid = 1, 1+n
	}
	return x
}

// await returns the reply of type want to xid last; an error reply to any xid in [first, last]
// fails it.
func (c *Client) await(ctx context.Context, first, last uint32, want uint8) (frame, error) {
	for {
		select {
		case <-ctx.Done():
			return frame{}, fmt.Errorf("openflow: no reply: %w", ctx.Err())
		case <-c.done:
			return frame{}, c.err
		case f := <-c.in:
			if f.XID < first || f.XID > last {
				continue
			}
			if f.Type == TypeError {
				return frame{}, parseError(f.body)
			}
			if f.XID == last && f.Type == want {
				return f, nil
			}
		}
	}
}

// Bundle applies mods in one atomic, ordered bundle: the bridge switches from its old rules to
// the result of all of them at once, or, when one fails, keeps the old ones. The open, the adds
// and the commit go out together (the bridge handles a connection's messages in order), so the
// bundle costs one round trip; an error to any of them fails it.
func (c *Client) Bundle(ctx context.Context, mods []FlowMod) error {
	x := c.begin(uint32(len(mods)) + 2)
	defer c.omu.Unlock()
	id := x
	msgs := make([][]byte, 0, len(mods)+2)
	msgs = append(msgs, bundleControl(x, id, bundleOpen))
	for i, m := range mods {
		msgs = append(msgs, bundleAdd(x+1+uint32(i), id, m.Encode()))
	}
	last := x + 1 + uint32(len(mods))
	msgs = append(msgs, bundleControl(last, id, bundleCommit))
	if err := c.write(bytes.Join(msgs, nil)); err != nil {
		return err
	}
	f, err := c.await(ctx, x, last, TypeBundleControl)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if len(f.body) < 6 || binary.BigEndian.Uint16(f.body[4:]) != bundleCommitReply {
		return errors.New("openflow: commit bundle: unexpected reply")
	}
	return nil
}

// FlowCount counts the flows of table (TableAll: every table) whose cookie equals cookie in
// the bits of mask and whose match is at least as specific as match.
func (c *Client) FlowCount(ctx context.Context, table uint8, cookie, mask uint64, match []OXM) (uint32, error) {
	x := c.begin(1)
	defer c.omu.Unlock()
	if err := c.write(aggregateRequest(x, table, cookie, mask, match)); err != nil {
		return 0, err
	}
	f, err := c.await(ctx, x, x, TypeMultipartReply)
	if err != nil {
		return 0, fmt.Errorf("flow count: %w", err)
	}
	return parseAggregateReply(f.body)
}
