package ovsdb

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeServer scripts the server side of one connection: for each request it receives, reply
// returns the raw messages to send back. The real ovsdb-server is exercised by cni/test/node;
// this fake covers protocol corners the real one does not produce on demand.
func fakeServer(t *testing.T, reply func(req map[string]any) []string) *Client {
	t.Helper()
	// A real socket, not net.Pipe: the protocol relies on buffering in both directions.
	ln, err := net.Listen("unix", t.TempDir()+"/db.sock")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(); srv.Close(); ln.Close() })
	go func() {
		dec := json.NewDecoder(srv)
		for {
			var req map[string]any
			if dec.Decode(&req) != nil {
				return
			}
			for _, msg := range reply(req) {
				if msg == "CLOSE" {
					srv.Close()
					return
				}
				if _, err := srv.Write([]byte(msg)); err != nil {
					return
				}
			}
		}
	}()
	return NewClient(cli)
}

func TestTransactWireFormatAndResult(t *testing.T) {
	var got map[string]any
	c := fakeServer(t, func(req map[string]any) []string {
		got = req
		return []string{`{"id":1,"error":null,"result":[{"rows":[{"name":"br0","_uuid":["uuid","u1"],"external_ids":["map",[["k","v"]]],"ofport":["set",[]]}]}]}`}
	})
	res, err := c.Transact(context.Background(), "Open_vSwitch", Select("Bridge", [][]any{Cond("name", "==", "br0")}))
	if err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(got["params"])
	if got["method"] != "transact" || string(params) != `["Open_vSwitch",{"op":"select","table":"Bridge","where":[["name","==","br0"]]}]` {
		t.Fatalf("request %v %s", got["method"], params)
	}
	row := res[0].Rows[0]
	name, _ := row.String("name")
	id, _ := row.UUID("_uuid")
	ids, _ := row.Map("external_ids")
	unset, err := row.String("ofport")
	if name != "br0" || id != "u1" || ids["k"] != "v" || unset != "" || err != nil {
		t.Fatalf("decoded %q %q %v %q %v", name, id, ids, unset, err)
	}
}

// Servers with an inactivity probe send "echo"; a client that does not answer is dropped.
func TestAnswersServerEchoAndSkipsStrayReplies(t *testing.T) {
	echoed := make(chan string, 1)
	c := fakeServer(t, func(req map[string]any) []string {
		if req["method"] == "transact" {
			return []string{`{"method":"echo","params":["x"],"id":"e1"}`, `{"id":99,"result":[],"error":null}`, `{"id":1,"result":[{}],"error":null}`}
		}
		b, _ := json.Marshal(req)
		echoed <- string(b)
		return nil
	})
	if _, err := c.Transact(context.Background(), "db", Delete("T", nil)); err != nil {
		t.Fatal(err)
	}
	if e := <-echoed; !strings.Contains(e, `"id":"e1"`) || !strings.Contains(e, `"result":["x"]`) {
		t.Fatalf("echo answer %s", e)
	}
}

func TestOperationAndCommitErrors(t *testing.T) {
	replies := []string{
		`{"id":1,"error":null,"result":[{"error":"timed out","details":"\"wait\" timed out"},null]}`,
		`{"id":2,"error":null,"result":[{"uuid":["uuid","a"]},{"error":"constraint violation","details":"dup"}]}`,
		`{"id":3,"error":null,"result":[{"count":1},{"error":"referential integrity violation","details":"x"}]}`,
	}
	i := 0
	c := fakeServer(t, func(map[string]any) []string { i++; return []string{replies[i-1]} })
	ops := []Op{WaitEqual("Bridge", nil, []string{"datapath_type"}, nil), Insert("Port", map[string]any{"name": "p"}, "p")}
	if _, err := c.Transact(context.Background(), "db", ops...); !IsConditionFailed(err) {
		t.Fatalf("wait failure: %v", err)
	}
	if _, err := c.Transact(context.Background(), "db", ops...); !IsConstraintViolation(err) {
		t.Fatalf("constraint: %v", err)
	}
	var tx *TxError
	if _, err := c.Transact(context.Background(), "db", Mutate("Bridge", nil)); !errors.As(err, &tx) || tx.Index != -1 {
		t.Fatalf("commit failure: %v", err)
	}
}

func TestBrokenConnectionAndDeadline(t *testing.T) {
	c := fakeServer(t, func(map[string]any) []string { return []string{"CLOSE"} })
	if _, err := c.Transact(context.Background(), "db"); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if err := c.Echo(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("a broken client must stay broken: %v", err)
	}
	silent := fakeServer(t, func(map[string]any) []string { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := silent.Echo(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a silent server must not hang the caller: %v", err)
	}
}
