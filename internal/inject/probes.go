package inject

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// App probes of shim containers. Under the shim the app listens only inside F-Stack: nothing
// answers on the pod IP, so the kubelet's httpGet and tcpSocket probes of the app fail (the pod
// never becomes Ready, or liveness kills it). As Istio does for its sidecar, those probes are
// rewritten to httpGet on the supervisor's port, and the supervisor performs the original through
// F-Stack with its probe agent. The user's timings stay as written.
//
// gRPC probes are rewritten too: the agent performs the standard health check over HTTP/2.
// Not rewritten, and recorded as kept in the annotation:
//   - exec probes: they run inside the container and need no network;
//   - probes with host set: the kubelet probes that address, not the pod, so the user chose a
//     path that does not go through the pod's kernel listener (an F-Stack port's address reached
//     over the node's network, for example).
//
// Refused: httpGet with scheme HTTPS (the agent speaks no TLS; a tcpSocket probe checks the
// port) and a named port the container does not declare.

// probeRecord is what the annotation shows for one probe.
type probeRecord struct {
	Original *corev1.Probe `json:"original"`
	// Path is where the supervisor serves the rewritten probe.
	Path string `json:"path,omitempty"`
	// Kept says why the probe was left as it was.
	Kept string `json:"kept,omitempty"`
}

// appProbePlan is decided before the pod changes: the rewritten probes by container index and
// probe field, what the supervisor performs, and what the annotation shows.
type appProbePlan struct {
	rewrite   map[int]map[string]*corev1.Probe
	perform   podcontract.AppProbes
	annotated map[string]map[string]probeRecord
}

// probeField is one of a container's three probes.
type probeField struct {
	name, kind string
	get        func(*corev1.Container) **corev1.Probe
}

var probeFields = []probeField{
	{"startupProbe", podcontract.ProbeStartup, func(c *corev1.Container) **corev1.Probe { return &c.StartupProbe }},
	{"readinessProbe", podcontract.ProbeReadiness, func(c *corev1.Container) **corev1.Probe { return &c.ReadinessProbe }},
	{"livenessProbe", podcontract.ProbeLiveness, func(c *corev1.Container) **corev1.Probe { return &c.LivenessProbe }},
}

// planAppProbes decides every shim container's probes; problems come back with field paths.
func (p *plan) planAppProbes() field.ErrorList {
	p.probes = appProbePlan{rewrite: map[int]map[string]*corev1.Probe{}, perform: podcontract.AppProbes{},
		annotated: map[string]map[string]probeRecord{}}
	var errs field.ErrorList
	for _, i := range p.shim {
		c := &p.pod.Spec.Containers[i]
		for _, f := range probeFields {
			probe := *f.get(c)
			if probe == nil {
				continue
			}
			path := field.NewPath("spec", "containers").Index(i).Child(f.name)
			rec, perform, err := planProbe(c, f.kind, probe, path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if p.probes.annotated[c.Name] == nil {
				p.probes.annotated[c.Name] = map[string]probeRecord{}
			}
			p.probes.annotated[c.Name][f.name] = rec
			if perform == nil {
				continue
			}
			p.probes.perform[rec.Path] = *perform
			if p.probes.rewrite[i] == nil {
				p.probes.rewrite[i] = map[string]*corev1.Probe{}
			}
			p.probes.rewrite[i][f.name] = rewritten(probe, rec.Path)
		}
	}
	return errs
}

// planProbe says what becomes of one probe: kept (perform is nil) or performed by the supervisor.
func planProbe(c *corev1.Container, kind string, probe *corev1.Probe, path *field.Path) (probeRecord, *podcontract.AppProbe, *field.Error) {
	rec := probeRecord{Original: probe.DeepCopy()}
	h := probe.ProbeHandler
	switch {
	case h.Exec != nil:
		rec.Kept = "exec: runs in the container, no network needed"
		return rec, nil, nil
	case h.TCPSocket != nil && h.TCPSocket.Host != "", h.HTTPGet != nil && h.HTTPGet.Host != "":
		rec.Kept = "host is set: the kubelet probes that address, not the pod"
		return rec, nil, nil
	case h.HTTPGet != nil && h.HTTPGet.Scheme == corev1.URISchemeHTTPS:
		return rec, nil, field.Forbidden(path.Child("httpGet", "scheme"),
			"HTTPS probes of an app under the F-Stack shim cannot be performed (the dataplane's prober speaks no TLS, and the kubelet cannot reach the app); use a tcpSocket probe of the port, an HTTP port, or an exec probe")
	case h.TCPSocket == nil && h.HTTPGet == nil && h.GRPC == nil:
		rec.Kept = "no handler"
		return rec, nil, nil
	}
	var port intstr.IntOrString
	var portPath *field.Path
	switch {
	case h.HTTPGet != nil:
		port, portPath = h.HTTPGet.Port, path.Child("httpGet", "port")
	case h.GRPC != nil:
		port, portPath = intstr.FromInt32(h.GRPC.Port), path.Child("grpc", "port")
	default:
		port, portPath = h.TCPSocket.Port, path.Child("tcpSocket", "port")
	}
	num, err := resolvePort(c, port, portPath)
	if err != nil {
		return rec, nil, err
	}
	perform := &podcontract.AppProbe{Port: num, TimeoutSeconds: max(probe.TimeoutSeconds, 1)}
	if g := h.HTTPGet; g != nil {
		perform.HTTPGet = &podcontract.AppHTTPGet{Path: g.Path}
		if perform.HTTPGet.Path == "" {
			perform.HTTPGet.Path = "/"
		}
		for _, hd := range g.HTTPHeaders {
			perform.HTTPGet.Headers = append(perform.HTTPGet.Headers, podcontract.AppHeader{Name: hd.Name, Value: hd.Value})
		}
	}
	if g := h.GRPC; g != nil {
		perform.GRPC = &podcontract.AppGRPC{}
		if g.Service != nil {
			perform.GRPC.Service = *g.Service
		}
	}
	rec.Path = podcontract.AppProbePath(c.Name, kind)
	if err := perform.Check(rec.Path); err != nil {
		return rec, nil, field.Forbidden(path, err.Error())
	}
	return rec, perform, nil
}

// resolvePort turns a probe's port into a number; a name must be one of the container's ports.
func resolvePort(c *corev1.Container, port intstr.IntOrString, path *field.Path) (int32, *field.Error) {
	if port.Type == intstr.Int {
		if port.IntVal < 1 || port.IntVal > 65535 {
			return 0, field.Invalid(path, port.IntVal, "must be between 1 and 65535")
		}
		return port.IntVal, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal && (cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP) {
			return cp.ContainerPort, nil
		}
	}
	return 0, field.Invalid(path, port.StrVal, fmt.Sprintf(
		"container %q declares no TCP port of that name; the dataplane performs this probe and the port is resolved at injection", c.Name))
}

// rewritten is probe pointed at the supervisor, with the user's timings.
func rewritten(probe *corev1.Probe, path string) *corev1.Probe {
	out := probe.DeepCopy()
	out.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: path, Port: intstr.FromInt32(podcontract.SupervisorPort), Scheme: corev1.URISchemeHTTP}}
	return out
}

// applyAppProbes rewrites the probes, hands the originals to the dataplane and annotates the pod.
func (p *plan) applyAppProbes(dp *corev1.Container) {
	for i, byField := range p.probes.rewrite {
		c := &p.pod.Spec.Containers[i]
		for _, f := range probeFields {
			if probe, ok := byField[f.name]; ok {
				*f.get(c) = probe
			}
		}
	}
	if len(p.probes.perform) > 0 {
		raw, _ := json.Marshal(p.probes.perform)
		dp.Env = append(dp.Env, corev1.EnvVar{Name: podcontract.EnvAppProbes, Value: string(raw)})
	}
	if len(p.probes.annotated) > 0 {
		raw, _ := json.Marshal(p.probes.annotated)
		p.pod.Annotations[podcontract.AppProbesAnnotation] = string(raw)
	}
}
