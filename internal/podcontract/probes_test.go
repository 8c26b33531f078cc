package podcontract

import (
	"strings"
	"testing"
)

func TestParseAppProbes(t *testing.T) {
	good := `{"/app-probe/nginx/readiness":{"port":80,"httpGet":{"path":"/healthz?x=1","headers":[{"name":"Host","value":"a.test"}]},"timeoutSeconds":2},` +
		`"/app-probe/nginx/liveness":{"port":80,"timeoutSeconds":1}}`
	ps, err := ParseAppProbes(good)
	if err != nil {
		t.Fatal(err)
	}
	if r := ps[AppProbePath("nginx", ProbeReadiness)]; r.Port != 80 || r.HTTPGet == nil || r.HTTPGet.Path != "/healthz?x=1" || r.TimeoutSeconds != 2 {
		t.Fatalf("readiness read back as %+v", r)
	}
	if l := ps[AppProbePath("nginx", ProbeLiveness)]; l.HTTPGet != nil || l.Port != 80 {
		t.Fatalf("liveness read back as %+v", l)
	}
	if ps, err := ParseAppProbes(""); err != nil || len(ps) != 0 {
		t.Fatalf("empty: %v %v", ps, err)
	}
	// The env var is written at admission, but the supervisor still refuses what would let a
	// value split the request the agent sends, or reach another port range.
	for name, raw := range map[string]string{
		"json":          `{`,
		"prefix":        `{"/metrics":{"port":80,"timeoutSeconds":1}}`,
		"port 0":        `{"/app-probe/a/liveness":{"port":0,"timeoutSeconds":1}}`,
		"port 70000":    `{"/app-probe/a/liveness":{"port":70000,"timeoutSeconds":1}}`,
		"timeout":       `{"/app-probe/a/liveness":{"port":80,"timeoutSeconds":0}}`,
		"path CRLF":     `{"/app-probe/a/readiness":{"port":80,"httpGet":{"path":"/x\r\nX-Evil: 1"},"timeoutSeconds":1}}`,
		"path space":    `{"/app-probe/a/readiness":{"port":80,"httpGet":{"path":"/x HTTP/1.0"},"timeoutSeconds":1}}`,
		"path relative": `{"/app-probe/a/readiness":{"port":80,"httpGet":{"path":"x"},"timeoutSeconds":1}}`,
		"header value":  `{"/app-probe/a/readiness":{"port":80,"httpGet":{"path":"/","headers":[{"name":"A","value":"b\r\nC: d"}]},"timeoutSeconds":1}}`,
		"grpc service":  `{"/app-probe/a/liveness":{"port":80,"grpc":{"service":"a\nb"},"timeoutSeconds":1}}`,
		"header name":   `{"/app-probe/a/readiness":{"port":80,"httpGet":{"path":"/","headers":[{"name":"A: b","value":"c"}]},"timeoutSeconds":1}}`,
	} {
		if _, err := ParseAppProbes(raw); err == nil || !strings.Contains(err.Error(), EnvAppProbes) {
			t.Errorf("%s: want an error naming %s, got %v", name, EnvAppProbes, err)
		}
	}
}
