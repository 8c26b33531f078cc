// Package telemetry is a small client of DPDK's telemetry socket (dpdk_telemetry.v2 in the
// primary's runtime directory). It needs no F-Stack tool and no EAL of its own, so it works with
// any file prefix and from any process that can reach the runtime directory.
//
// The protocol is JSON over a unix SOCK_SEQPACKET socket: the server greets with
// {"version":..., "pid":..., "max_output_len":...}; each request is one packet holding a command
// ("/ethdev/list", "/ethdev/stats,0") and each reply one packet {"<command>": <value>}.
package telemetry

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SocketName is the telemetry socket's file name in the runtime directory.
const SocketName = "dpdk_telemetry.v2"

// Greeting is what the server sends on connect.
type Greeting struct {
	Version      string `json:"version"`
	PID          int    `json:"pid"`
	MaxOutputLen int    `json:"max_output_len"`
}

// Client is one connection. It is not safe for concurrent use: the protocol has no request ids.
type Client struct {
	conn     *net.UnixConn
	buf      []byte
	timeout  time.Duration
	Greeting Greeting
}

// SocketPath is the telemetry socket of the primary whose runtime directory is runtimeDir/prefix.
func SocketPath(runtimeDir, prefix string) string {
	return filepath.Join(runtimeDir, prefix, SocketName)
}

// Dial connects and reads the greeting; every later read and write is bounded by timeout.
func Dial(path string, timeout time.Duration) (*Client, error) {
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	c := &Client{conn: conn, buf: make([]byte, 64*1024), timeout: timeout}
	data, err := c.read()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("telemetry greeting from %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &c.Greeting); err != nil {
		conn.Close()
		return nil, fmt.Errorf("telemetry greeting from %s: %w", path, err)
	}
	if c.Greeting.MaxOutputLen > len(c.buf) {
		c.buf = make([]byte, c.Greeting.MaxOutputLen)
	}
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) read() ([]byte, error) {
	if err := c.conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return nil, err
	}
	n, err := c.conn.Read(c.buf)
	if err != nil {
		return nil, err
	}
	return c.buf[:n], nil
}

// Command sends cmd and returns the value of the reply's single member, named after the command
// without its parameters.
func (c *Client) Command(cmd string) (json.RawMessage, error) {
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write([]byte(cmd)); err != nil {
		return nil, fmt.Errorf("telemetry %s: %w", cmd, err)
	}
	data, err := c.read()
	if err != nil {
		return nil, fmt.Errorf("telemetry %s: %w", cmd, err)
	}
	var reply map[string]json.RawMessage
	if err := json.Unmarshal(data, &reply); err != nil {
		return nil, fmt.Errorf("telemetry %s: reply %q: %w", cmd, data, err)
	}
	name, _, _ := strings.Cut(cmd, ",")
	v, ok := reply[name]
	if !ok {
		return nil, fmt.Errorf("telemetry %s: reply %q has no member %q", cmd, data, name)
	}
	if string(v) == "null" {
		return nil, fmt.Errorf("telemetry %s: the server does not know it (null reply)", cmd)
	}
	return v, nil
}

// EthdevList returns the DPDK port ids.
func (c *Client) EthdevList() ([]int, error) {
	v, err := c.Command("/ethdev/list")
	if err != nil {
		return nil, err
	}
	var ids []int
	if err := json.Unmarshal(v, &ids); err != nil {
		return nil, fmt.Errorf("telemetry /ethdev/list: %s: %w", v, err)
	}
	return ids, nil
}

// EthdevStarted reports whether a port's rte_eth_dev_start has completed (/ethdev/info's
// dev_started), the point after which other processes may poll its queues.
func (c *Client) EthdevStarted(port int) (bool, error) {
	v, err := c.Command("/ethdev/info," + strconv.Itoa(port))
	if err != nil {
		return false, err
	}
	var info struct {
		DevStarted *int `json:"dev_started"`
	}
	if err := json.Unmarshal(v, &info); err != nil {
		return false, fmt.Errorf("telemetry /ethdev/info,%d: %s: %w", port, v, err)
	}
	if info.DevStarted == nil {
		return false, fmt.Errorf("telemetry /ethdev/info,%d has no dev_started: %s", port, v)
	}
	return *info.DevStarted == 1, nil
}

// EthdevLinkUp reports a port's link status (/ethdev/link_status,<port>). The primary answers it
// with rte_eth_link_get_nowait, which is not only a read: a virtio-user port that is the
// vhost-user server notices there that its peer went away, and on a later call accepts the
// peer's new connection and renegotiates (DPDK's vhost_user_update_link_state). An application
// that never asks its link, as F-Stack after start, never reconnects unless someone asks.
func (c *Client) EthdevLinkUp(port int) (bool, error) {
	cmd := "/ethdev/link_status," + strconv.Itoa(port)
	v, err := c.Command(cmd)
	if err != nil {
		return false, err
	}
	var link struct {
		Status *string `json:"status"`
	}
	if err := json.Unmarshal(v, &link); err != nil {
		return false, fmt.Errorf("telemetry %s: %s: %w", cmd, v, err)
	}
	switch {
	case link.Status == nil:
		return false, fmt.Errorf("telemetry %s has no status: %s", cmd, v)
	case *link.Status == "UP":
		return true, nil
	case *link.Status == "DOWN":
		return false, nil
	}
	return false, fmt.Errorf("telemetry %s: status %q is neither UP nor DOWN", cmd, *link.Status)
}

// EthdevStats returns a port's scalar counters (ipackets, opackets, ibytes, obytes, imissed,
// ierrors, oerrors, rx_nombuf); the per-queue arrays are left out.
func (c *Client) EthdevStats(port int) (map[string]uint64, error) {
	v, err := c.Command("/ethdev/stats," + strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, fmt.Errorf("telemetry /ethdev/stats,%d: %s: %w", port, v, err)
	}
	stats := map[string]uint64{}
	for k, r := range raw {
		var n uint64
		if json.Unmarshal(r, &n) == nil {
			stats[k] = n
		}
	}
	return stats, nil
}

// PortStats is one port's counters.
type PortStats struct {
	Port  int
	Stats map[string]uint64
}

// AllEthdevStats connects to path, lists the ports and reads each port's counters.
func AllEthdevStats(path string, timeout time.Duration) ([]PortStats, error) {
	c, err := Dial(path, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ids, err := c.EthdevList()
	if err != nil {
		return nil, err
	}
	out := make([]PortStats, 0, len(ids))
	for _, id := range ids {
		st, err := c.EthdevStats(id)
		if err != nil {
			return nil, err
		}
		out = append(out, PortStats{Port: id, Stats: st})
	}
	return out, nil
}
