package manager

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// Until the drain the webhooks keep their connections; from it on, each answer ends its own
// (HTTP/1.1: Connection: close, read with the response; HTTP/2: GOAWAY, then the server closes
// the connection), so the client's next call dials, and no call is lost on the way.
func TestDrainEndsEachConnectionAfterItsAnswer(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		d := &Drain{}
		srv := httptest.NewUnstartedServer(d.endConnections(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ok")
		})))
		var opened, closed atomic.Int32
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				opened.Add(1)
			case http.StateClosed, http.StateHijacked:
				closed.Add(1)
			}
		}
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		c := srv.Client()
		post := func() (reused, closes bool) {
			t.Helper()
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("h2 %v: %v", h2, err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(body) != "ok" {
				t.Fatalf("h2 %v: answered %q", h2, body)
			}
			return reused, resp.Close
		}
		post()
		if reused, closes := post(); !reused || closes {
			t.Fatalf("h2 %v, before the drain: second call reused the connection %v, its answer ends it %v", h2, reused, closes)
		}
		d.Start()
		if reused, closes := post(); !reused || closes != !h2 {
			t.Fatalf("h2 %v, draining: on the kept connection %v, Connection: close %v", h2, reused, closes)
		}
		// The server ends the connection it answered on (HTTP/2 after its GOAWAY).
		for deadline := time.Now().Add(time.Minute); closed.Load() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("h2 %v: the server kept the connection it answered on while draining", h2)
			}
		}
		if reused, _ := post(); reused || opened.Load() != 2 {
			t.Fatalf("h2 %v: after the drain's answer the next call reused a connection %v (%d opened)", h2, reused, opened.Load())
		}
		srv.Close()
	}
}

// The manager's context ends delay after the signal, the replica draining from the signal on;
// canceled before any signal, it ends without a drain.
func TestStopAfterDrain(t *testing.T) {
	d := &Drain{}
	signaled, signal := context.WithCancel(context.Background())
	ctx := StopAfterDrain(context.Background(), signaled, d, 10*time.Millisecond, logr.Discard())
	if d.Draining() || ctx.Err() != nil || d.ready(nil) != nil {
		t.Fatal("draining or stopped before any signal")
	}
	signal()
	<-ctx.Done()
	if !d.Draining() || d.ready(nil) == nil {
		t.Fatal("stopped without draining, or still ready")
	}

	d = &Drain{}
	parent, cancel := context.WithCancel(context.Background())
	ctx = StopAfterDrain(parent, context.Background(), d, time.Hour, logr.Discard())
	cancel()
	<-ctx.Done()
	if d.Draining() {
		t.Fatal("a manager stopped by its parent drained")
	}
}
