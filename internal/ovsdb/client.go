// Package ovsdb is a small OVSDB client (RFC 7047: JSON-RPC 1.0 over a stream socket).
//
// It exists because no Go OVSDB library can be fetched on the project's machines, and exec'ing
// ovs-vsctl per call is slow and needs the tool on every node. It speaks only what a CNI plugin
// needs: "transact" (with any operation, including the conditional "wait" and "mutate") and
// "echo". A Client is used by one goroutine at a time and sends one request at a time, which keeps
// it simple: a CNI command makes a handful of calls and exits.
package ovsdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// ErrClosed is returned for calls on a client whose connection has failed or been closed.
var ErrClosed = errors.New("ovsdb: connection closed")

// Client is one connection to an OVSDB server.
type Client struct {
	mu     sync.Mutex
	conn   net.Conn
	enc    *json.Encoder
	dec    *json.Decoder
	nextID uint64
	broken bool
}

// response is one message from the server, member by member: a reply ("result", "error",
// "id") or a request of its own ("method", "params", "id"), told apart by which members it has.
type response map[string]json.RawMessage

func (r response) method() string {
	var m string
	_ = json.Unmarshal(r["method"], &m)
	return m
}

// Dial connects to the unix socket at path (for example /var/run/openvswitch/db.sock).
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("ovsdb: dial %s: %w", path, err)
	}
	return NewClient(conn), nil
}

// NewClient wraps an established connection; Dial is the usual way in.
func NewClient(conn net.Conn) *Client {
	return &Client{conn: conn, enc: json.NewEncoder(conn), dec: json.NewDecoder(conn)}
}

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broken = true
	return c.conn.Close()
}

// Echo checks that the server answers.
func (c *Client) Echo(ctx context.Context) error {
	_, err := c.call(ctx, "echo", []any{"ping"})
	return err
}

// call sends one request and waits for its reply, answering the server's own echo requests
// meanwhile (servers with an inactivity probe send them and drop clients that stay silent).
func (c *Client) call(ctx context.Context, method string, params []any) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return nil, ErrClosed
	}
	stop := c.applyDeadline(ctx)
	defer stop()
	c.nextID++
	id := c.nextID
	req, err := encodeRequest(method, params, id)
	if err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(req); err != nil {
		return nil, c.fail(ctx, err)
	}
	for {
		var msg response
		if err := c.dec.Decode(&msg); err != nil {
			return nil, c.fail(ctx, err)
		}
		if msg.method() != "" {
			if err := c.answerServer(msg); err != nil {
				return nil, c.fail(ctx, err)
			}
			continue
		}
		var got uint64
		if json.Unmarshal(msg["id"], &got) != nil || got != id {
			continue // a late reply to a request we gave up on
		}
		if e := msg["error"]; len(e) > 0 && string(e) != "null" {
			return nil, fmt.Errorf("ovsdb: %s: %s", method, e)
		}
		return msg["result"], nil
	}
}

// encodeRequest writes one JSON-RPC request, newline-terminated as ovsdb-server's stream
// framing allows.
func encodeRequest(method string, params []any, id uint64) ([]byte, error) {
	b, err := json.Marshal(request{Method: method, Params: params, ID: id})
	if err != nil {
		return nil, fmt.Errorf("ovsdb: encode %s: %w", method, err)
	}
	return append(b, '\n'), nil
}

type request struct {
	Method string `json:"method"`
	Params []any  `json:"params"`
	ID     uint64 `json:"id"`
}

func (c *Client) answerServer(msg response) error {
	if msg.method() != "echo" {
		return nil // notifications ("update", "locked", ...) are of no interest here
	}
	var params []any
	_ = json.Unmarshal(msg["params"], &params)
	return c.enc.Encode(struct {
		Result []any           `json:"result"`
		Error  any             `json:"error"`
		ID     json.RawMessage `json:"id"`
	}{Result: params, ID: msg["id"]})
}

// applyDeadline maps the context onto the socket, so a hung server cannot hang the caller. The
// cancellation hook is a context.AfterFunc rather than a goroutine waiting on ctx.Done: starting
// a goroutine per call wakes a second thread to run it, a scheduler hand-off that a busy node
// makes wait behind other work, while AfterFunc costs nothing until the context ends.
func (c *Client) applyDeadline(ctx context.Context) func() {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	return func() {
		if stop() {
			_ = c.conn.SetDeadline(time.Time{})
		}
	}
}

// fail marks the connection unusable: after an I/O error the stream position is unknown.
func (c *Client) fail(ctx context.Context, err error) error {
	c.broken = true
	_ = c.conn.Close()
	if ctx.Err() != nil {
		return fmt.Errorf("ovsdb: %w", ctx.Err())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The socket deadline can fire a moment before the context's own timer.
		return fmt.Errorf("ovsdb: %w: %w", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("ovsdb: %w: %w", ErrClosed, err)
}
