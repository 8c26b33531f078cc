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

	"golang.org/x/sys/unix"
)

// SocketName is the telemetry socket's file name in the runtime directory.
const SocketName = "dpdk_telemetry.v2"

// MaxOutputLen is the longest reply DPDK's telemetry sends: MAX_OUTPUT_LEN in lib/telemetry,
// fixed at 16 KiB in DPDK 23.11 and announced in the greeting as max_output_len.
const MaxOutputLen = 16 * 1024

// bufLen is what the client reads a packet into. It never grows: the greeting's max_output_len
// comes from whoever bound the socket, and the runtime directory is shared with the app
// containers, so sizing by it let an app make the supervisor allocate what it announced. Four
// times DPDK's own limit leaves room for a build that raised it; a greeting above is refused.
const bufLen = 4 * MaxOutputLen

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
	// Peer is the server process as the kernel recorded it when the socket was listened on.
	Peer unix.Ucred
}

// SocketPath is the telemetry socket of the primary whose runtime directory is runtimeDir/prefix.
func SocketPath(runtimeDir, prefix string) string {
	return filepath.Join(runtimeDir, prefix, SocketName)
}

// Dial connects, vets the process serving the socket with peer (from SO_PEERCRED, before a byte
// of its is read) and reads the greeting; every later read and write is bounded by timeout.
func Dial(path string, timeout time.Duration, peer Peer) (*Client, error) {
	if peer == nil {
		return nil, fmt.Errorf("telemetry %s: no peer check given (a caller must say which process may serve it)", path)
	}
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	c := &Client{conn: conn, buf: make([]byte, bufLen), timeout: timeout}
	if err := c.checkPeer(peer); err != nil {
		conn.Close()
		return nil, fmt.Errorf("telemetry %s: %w", path, err)
	}
	data, err := c.read()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("telemetry greeting from %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &c.Greeting); err != nil {
		conn.Close()
		return nil, fmt.Errorf("telemetry greeting from %s: %w", path, err)
	}
	if c.Greeting.MaxOutputLen > bufLen {
		conn.Close()
		return nil, fmt.Errorf("telemetry greeting from %s announces max_output_len %d, above the %d bytes this client reads (DPDK 23.11 sends at most %d): not a DPDK primary this supervisor can read",
			path, c.Greeting.MaxOutputLen, bufLen, MaxOutputLen)
	}
	return c, nil
}

func (c *Client) checkPeer(peer Peer) error {
	raw, err := c.conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	c.Peer = *cred
	return peer(cred)
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// read reads one packet; one longer than the buffer is an error, never a truncated reply parsed.
func (c *Client) read() ([]byte, error) {
	if err := c.conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return nil, err
	}
	n, _, flags, _, err := c.conn.ReadMsgUnix(c.buf, nil)
	if err != nil {
		return nil, err
	}
	if flags&unix.MSG_TRUNC != 0 {
		return nil, fmt.Errorf("a packet longer than the %d bytes this client reads (DPDK 23.11 sends at most %d)", len(c.buf), MaxOutputLen)
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
		return nil, fmt.Errorf("telemetry %s: reply %.200q: %w", cmd, data, err)
	}
	name, _, _ := strings.Cut(cmd, ",")
	v, ok := reply[name]
	if !ok {
		return nil, fmt.Errorf("telemetry %s: reply %.200q has no member %q", cmd, data, name)
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
		return nil, fmt.Errorf("telemetry /ethdev/list: %.200s: %w", v, err)
	}
	if len(ids) > MaxArrayEntries {
		return nil, fmt.Errorf("telemetry /ethdev/list lists %d ports, more than a DPDK telemetry array holds (%d): refused", len(ids), MaxArrayEntries)
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
		return false, fmt.Errorf("telemetry /ethdev/info,%d: %.200s: %w", port, v, err)
	}
	if info.DevStarted == nil {
		return false, fmt.Errorf("telemetry /ethdev/info,%d has no dev_started: %.200s", port, v)
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
		return false, fmt.Errorf("telemetry %s: %.200s: %w", cmd, v, err)
	}
	switch {
	case link.Status == nil:
		return false, fmt.Errorf("telemetry %s has no status: %.200s", cmd, v)
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
		return nil, fmt.Errorf("telemetry /ethdev/stats,%d: %.200s: %w", port, v, err)
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

// AllEthdevStats connects to path (served by a process peer accepts), lists the ports and reads each port's counters.
func AllEthdevStats(path string, timeout time.Duration, peer Peer) ([]PortStats, error) {
	c, err := Dial(path, timeout, peer)
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
