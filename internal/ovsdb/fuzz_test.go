package ovsdb

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// replayConn is a connection whose server side is a fixed byte stream (the fuzzer's), then EOF;
// what the client writes is discarded.
type replayConn struct{ r io.Reader }

func (c *replayConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *replayConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *replayConn) Close() error                     { return nil }
func (c *replayConn) LocalAddr() net.Addr              { return &net.UnixAddr{Net: "unix"} }
func (c *replayConn) RemoteAddr() net.Addr             { return &net.UnixAddr{Net: "unix"} }
func (c *replayConn) SetDeadline(time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(time.Time) error { return nil }

// The replies of ovsdb-server are parsed by a root process on every CNI call: whatever bytes
// come back, Transact returns (an error, or one result per operation with no error in any),
// and every row accessor holds up against any column.
func FuzzTransactReply(f *testing.F) {
	for _, s := range []string{
		// The shapes ovsdb-server (OVS 3.x) gives ADD, DEL and a refused ADD, as the node tier sees them.
		`{"id":1,"error":null,"result":[{},{},{"uuid":["uuid","1f3e0000-0000-4000-8000-000000000001"]},{"uuid":["uuid","8b6a1d2e-0000-8000-8000-000000000002"]},{"count":1}]}`,
		`{"id":1,"error":null,"result":[{"rows":[{"name":"fsk0123456789ab","type":"dpdkvhostuserclient","options":["map",[["vhost-server-path","/var/run/kube-fstack/vhost/u1/net1.sock"]]],"external_ids":["map",[["kube-fstack.io/owner","fstack-cni"],["kube-fstack.io/ifname","net1"]]],"_uuid":["uuid","u1"],"ofport":["set",[]]}]},{"count":0}]}`,
		`{"id":1,"error":null,"result":[{"error":"timed out","details":"\"wait\" timed out"},null,null,null,null]}`,
		`{"id":1,"error":null,"result":[{},{},{},{},{},{"error":"constraint violation","details":"Transaction causes multiple rows in \"Interface\" table to have identical values"}]}`,
		`{"id":null,"method":"echo","params":[]}` + "\n" + `{"id":1,"error":null,"result":[{"rows":[]},{},{}]}`,
		`{"id":7,"result":[]}{"id":1,"error":{"error":"unknown database"},"result":null}`,
		`{"method":"update","params":[null,{}],"id":null}{"id":1,"result":[{"rows":[{"name":5,"_uuid":"x","options":["map",[[1,2]]]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	ops := []Op{Select("Interface", [][]any{Cond("name", "==", "x")}, "name", "options"), Insert("Interface", map[string]any{"name": "x"}, "i"),
		Mutate("Bridge", nil, []any{"ports", "insert", Set(NamedUUID("i"))})}
	f.Fuzz(func(t *testing.T, reply []byte) {
		c := NewClient(&replayConn{r: bytes.NewReader(reply)})
		res, err := c.Transact(context.Background(), "Open_vSwitch", ops...)
		if err != nil {
			var tx *TxError
			if errors.As(err, &tx) && (tx.Index < -1 || tx.Index >= len(ops)) {
				t.Fatalf("TxError index %d of %d operations", tx.Index, len(ops))
			}
			if !strings.HasPrefix(err.Error(), "ovsdb: ") {
				t.Fatalf("error %q does not say it is OVSDB's", err)
			}
			return
		}
		if len(res) < len(ops) {
			t.Fatalf("%d results for %d operations and no error", len(res), len(ops))
		}
		for _, r := range res {
			if r.Error != "" {
				t.Fatalf("result error %q but no error returned", r.Error)
			}
			for _, row := range r.Rows {
				for col := range row {
					_, _ = row.String(col)
					_, _ = row.UUID(col)
					_, _ = row.Map(col)
				}
			}
		}
	})
}
