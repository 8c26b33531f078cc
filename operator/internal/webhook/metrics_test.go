package webhook

import (
	"crypto/tls"
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

func handshakes(t *testing.T, protocol string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := tlsHandshakes.WithLabelValues(protocol).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Every handshake is counted by protocol, and a VerifyConnection set before still decides.
func TestCountHandshakes(t *testing.T) {
	refuse := errors.New("refused")
	cfg := &tls.Config{VerifyConnection: func(cs tls.ConnectionState) error {
		if cs.ServerName == "bad" {
			return refuse
		}
		return nil
	}}
	CountHandshakes(cfg)
	h2, none := handshakes(t, "h2"), handshakes(t, "none")
	if err := cfg.VerifyConnection(tls.ConnectionState{NegotiatedProtocol: "h2"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.VerifyConnection(tls.ConnectionState{}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.VerifyConnection(tls.ConnectionState{ServerName: "bad"}); !errors.Is(err, refuse) {
		t.Fatalf("the earlier VerifyConnection was bypassed: %v", err)
	}
	if got := handshakes(t, "h2") - h2; got != 1 {
		t.Fatalf("h2 handshakes counted %v, want 1", got)
	}
	if got := handshakes(t, "none") - none; got != 1 {
		t.Fatalf("handshakes without ALPN counted %v, want 1 (a refused one is not counted)", got)
	}
}
