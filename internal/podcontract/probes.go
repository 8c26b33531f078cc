package podcontract

import (
	"encoding/json"
	"fmt"
	"strings"
)

// App probes. Under the shim an app has no kernel listener, so the kubelet's httpGet and
// tcpSocket probes of it are refused. The injector rewrites them to httpGet on SupervisorPort at
// AppProbePath(container, kind) and hands the originals to the supervisor in EnvAppProbes; the
// supervisor performs each through F-Stack with its probe agent (ProbeAgent).
const (
	// AppProbePrefix starts every rewritten probe's path.
	AppProbePrefix = "/app-probe/"
	// EnvAppProbes on the dataplane container holds AppProbes as JSON. An env var, not an
	// annotation: a pod's env cannot change after admission, its annotations can.
	EnvAppProbes = "FSTACK_APP_PROBES"
	// AppProbesAnnotation shows users the probes as they wrote them (and the ones kept as they
	// were, with why); nothing reads it back.
	AppProbesAnnotation = "kubefstack.io/app-probes"
	// ProbeAgent is the dataplane image's probe agent: a small C program the supervisor runs under
	// the shim (a client of F-Stack) and asks, one line at a time, to connect to the app.
	ProbeAgent = "/usr/local/bin/fstack-probe-agent"
)

// The probe kinds, as the last element of an app probe's path.
const (
	ProbeStartup   = "startup"
	ProbeReadiness = "readiness"
	ProbeLiveness  = "liveness"
)

// AppProbePath is where the supervisor serves container's probe of the given kind.
func AppProbePath(container, kind string) string {
	return AppProbePrefix + container + "/" + kind
}

// AppProbe is one original probe as the supervisor performs it: a TCP connect to Port, an HTTP
// GET of Path with Headers (names as given; a Host header overrides the default), or a gRPC
// health check.
type AppProbe struct {
	Port           int32       `json:"port"`
	HTTPGet        *AppHTTPGet `json:"httpGet,omitempty"`
	GRPC           *AppGRPC    `json:"grpc,omitempty"`
	TimeoutSeconds int32       `json:"timeoutSeconds"`
}

// AppGRPC is the gRPC part of an AppProbe: grpc.health.v1.Health/Check of Service ("" asks for
// the server's overall health).
type AppGRPC struct {
	Service string `json:"service,omitempty"`
}

// MaxGRPCService bounds a gRPC probe's service name (the agent's limit).
const MaxGRPCService = 200

// AppHTTPGet is the HTTP part of an AppProbe.
type AppHTTPGet struct {
	Path    string      `json:"path"`
	Headers []AppHeader `json:"headers,omitempty"`
}

// AppHeader is one request header of an httpGet probe.
type AppHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// AppProbes maps an app probe's path (AppProbePath) to the probe.
type AppProbes map[string]AppProbe

// ParseAppProbes reads EnvAppProbes. Every probe is checked as the supervisor will use it: the
// value comes from the pod spec, so it is treated as hostile (no line breaks or control bytes
// reach the request the agent sends).
func ParseAppProbes(raw string) (AppProbes, error) {
	if strings.TrimSpace(raw) == "" {
		return AppProbes{}, nil
	}
	var probes AppProbes
	if err := json.Unmarshal([]byte(raw), &probes); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON for app probes: %w", EnvAppProbes, err)
	}
	for path, p := range probes {
		if err := p.Check(path); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvAppProbes, err)
		}
	}
	return probes, nil
}

// Check refuses a probe the supervisor must not perform as given.
func (p AppProbe) Check(path string) error {
	if !strings.HasPrefix(path, AppProbePrefix) || !printable(path) {
		return fmt.Errorf("probe path %q does not start with %s", path, AppProbePrefix)
	}
	if p.Port < 1 || p.Port > 65535 {
		return fmt.Errorf("probe %s: port %d is not in 1-65535", path, p.Port)
	}
	if p.TimeoutSeconds < 1 {
		return fmt.Errorf("probe %s: timeoutSeconds %d is below 1", path, p.TimeoutSeconds)
	}
	if p.GRPC != nil && (p.HTTPGet != nil || len(p.GRPC.Service) > MaxGRPCService || !printable(p.GRPC.Service)) {
		return fmt.Errorf("probe %s: a gRPC probe with an HTTP part, or a service name that is longer than %d or holds control bytes", path, MaxGRPCService)
	}
	if h := p.HTTPGet; h != nil {
		if !strings.HasPrefix(h.Path, "/") || !printable(h.Path) || strings.Contains(h.Path, " ") {
			return fmt.Errorf("probe %s: HTTP path %q must start with / and hold no spaces or control bytes", path, h.Path)
		}
		for _, hd := range h.Headers {
			if hd.Name == "" || !printable(hd.Name) || strings.ContainsAny(hd.Name, ": ") || !printable(hd.Value) {
				return fmt.Errorf("probe %s: header %q holds a character a request header cannot", path, hd.Name)
			}
		}
	}
	return nil
}

// printable rejects control bytes (CR and LF above all), which would split the request.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}
