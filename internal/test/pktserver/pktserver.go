// Package pktserver serves a unix seqpacket socket the way DPDK's telemetry does, for tests of
// its clients: a greeting on each connection, then one reply packet per request packet. The
// tests use it for the primary's socket and for what an app that rebinds that socket (in the
// shared runtime directory) could answer instead.
package pktserver

import (
	"net"
	"testing"
)

// Serve listens at path until the test ends; every connection gets greeting, then reply(req)
// for each request packet req.
func Serve(t testing.TB, path string, greeting []byte, reply func(req string) []byte) {
	t.Helper()
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.AcceptUnix()
			if err != nil {
				return
			}
			go answer(conn, greeting, reply)
		}
	}()
}

func answer(conn *net.UnixConn, greeting []byte, reply func(string) []byte) {
	defer conn.Close()
	if _, err := conn.Write(greeting); err != nil {
		return
	}
	buf := make([]byte, 1024)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		if _, err := conn.Write(reply(string(buf[:n]))); err != nil {
			return
		}
	}
}
