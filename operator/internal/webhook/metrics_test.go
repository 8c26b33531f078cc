package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
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

func injectionCount(t *testing.T, result, reason string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := injections.WithLabelValues(result, reason).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Each answer is counted once, under the result a user graphs and the reason behind it; a pod
// refused for its own fault is not also counted as an error or twice as refused.
func TestInjectionsCountedByResult(t *testing.T) {
	h := newInjector(t)
	ctx := context.Background()
	pod := podJSON(t)
	noCmd := podJSON(t, fixtures.WithoutCommand("nginx"))
	missing := podJSON(t, fixtures.WithStackLabel("nope"))
	for _, tc := range []struct {
		ns, pod        string
		result, reason string
	}{
		{"web", string(pod), resultInjected, ""},
		{"kube-fstack-system", string(pod), resultSkipped, "operator-namespace"},
		{"web", string(missing), resultRefused, "stack-not-found"},
		{"web", string(noCmd), resultRefused, "pod-invalid"},
		{"web", "{not json", resultError, "decode"},
	} {
		before := map[[2]string]float64{}
		for result, reasons := range injectionReasons {
			for _, reason := range reasons {
				before[[2]string{result, reason}] = injectionCount(t, result, reason)
			}
		}
		h.Handle(ctx, request(tc.ns, []byte(tc.pod)))
		for key, was := range before {
			want := was
			if key == [2]string{tc.result, tc.reason} {
				want++
			}
			if got := injectionCount(t, key[0], key[1]); got != want {
				t.Errorf("after a %s/%s answer, {result=%q,reason=%q} is %v, want %v", tc.result, tc.reason, key[0], key[1], got, want)
			}
		}
	}
}
