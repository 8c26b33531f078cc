package cli

import (
	"bytes"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A bug report is meant to be attached to a public issue, so what it holds is redacted twice:
// the objects before they are encoded (an environment variable's value, a flag's argument, the
// last-applied annotation that copies them), and then every file's bytes (each secret value the
// objects held, wherever it was copied to: a log line, an event, an error message; the status
// token's header and bearer tokens by their form). Secrets are never read at all.

// redacted replaces every value the report leaves out.
const redacted = "REDACTED"

// lastApplied is kubectl apply's copy of the object as applied: its env values, unredacted.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// minScrubbed is the shortest secret value scrubbed from the files' bytes: a shorter one (a
// variable "KEY=1") would turn every "1" of the report into REDACTED. Its variable is redacted
// in the objects whatever its length.
const minScrubbed = 8

// secretWords in a variable's name (upper-cased) mark its value as secret.
var secretWords = []string{"TOKEN", "PASSWORD", "PASSWD", "SECRET", "KEY", "CREDENTIAL"}

// secretFlagWords in a flag's name (lower-cased) mark its argument as secret. KEY and SECRET are
// not among them: the operator's --cert-secret names a Secret and a --*-key-file a path, both
// what a maintainer needs to see, neither a secret itself.
var secretFlagWords = []string{"token", "password", "passwd", "credential", "apikey", "api-key", "api_key"}

func secretEnvName(name string) bool {
	if name == podcontract.EnvStatusToken {
		return true
	}
	up := strings.ToUpper(name)
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(up, w) })
}

func secretFlagName(flag string) bool {
	low := strings.ToLower(flag)
	return slices.ContainsFunc(secretFlagWords, func(w string) bool { return strings.Contains(low, w) })
}

// redactor redacts objects and scrubs bytes; it learns the secret values from the objects it
// redacts, so that scrub removes them from every file, the logs included.
type redactor struct {
	secrets map[string]bool
}

func newRedactor(known ...string) *redactor {
	r := &redactor{secrets: map[string]bool{}}
	for _, s := range known {
		r.learn(s)
	}
	return r
}

func (r *redactor) learn(s string) {
	if len(s) >= minScrubbed {
		r.secrets[s] = true
	}
}

// meta drops managedFields (noise, and the history of who set which field) and kubectl's
// last-applied copy of the object.
func (r *redactor) meta(m metav1.Object) {
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[lastApplied]; ok {
			a[lastApplied] = redacted
		}
	}
}

// pod redacts a pod in place: its metadata and every container's secret variables and flags.
func (r *redactor) pod(p *corev1.Pod) {
	r.meta(p)
	r.podSpec(&p.Spec)
}

// deployment redacts a Deployment in place, its pod template as a pod.
func (r *redactor) deployment(d *appsv1.Deployment) {
	r.meta(d)
	r.meta(&d.Spec.Template)
	r.podSpec(&d.Spec.Template.Spec)
}

func (r *redactor) podSpec(s *corev1.PodSpec) {
	for i := range s.InitContainers {
		r.container(s.InitContainers[i].Env, s.InitContainers[i].Command, s.InitContainers[i].Args)
	}
	for i := range s.Containers {
		r.container(s.Containers[i].Env, s.Containers[i].Command, s.Containers[i].Args)
	}
	for i := range s.EphemeralContainers {
		c := &s.EphemeralContainers[i].EphemeralContainerCommon
		r.container(c.Env, c.Command, c.Args)
	}
}

// container redacts, in place, the values of the secret variables (one from a Secret's key
// keeps its reference: it names the key, it holds no value) and the arguments of secret flags,
// "--token=X" and "--token X" alike.
func (r *redactor) container(env []corev1.EnvVar, argvs ...[]string) {
	for i := range env {
		if env[i].Value != "" && secretEnvName(env[i].Name) {
			r.learn(env[i].Value)
			env[i].Value = redacted
		}
	}
	for _, argv := range argvs {
		for i := range argv {
			flag, value, hasValue := strings.Cut(argv[i], "=")
			if !strings.HasPrefix(flag, "-") || !secretFlagName(flag) {
				continue
			}
			if hasValue {
				r.learn(value)
				argv[i] = flag + "=" + redacted
			} else if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
				r.learn(argv[i+1])
				argv[i+1] = redacted
			}
		}
	}
}

var (
	// tokenHeader is the status token's header with its value, as a request line, a JSON or
	// YAML key, or Go's printed http.Header (X-Kubefstack-Token:[value]).
	tokenHeader = regexp.MustCompile(`(?i)(` + regexp.QuoteMeta(podcontract.StatusTokenHeader) + `["']?\s*[:=]\s*\[?\s*["']?)[A-Za-z0-9_\-]+`)
	// bearer is a bearer token, in an Authorization header or anywhere else.
	bearer = regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]+=*`)
	// envAssignment is NAME=value of a variable whose upper-case name says it is secret, as a
	// process's environment is printed.
	envAssignment = regexp.MustCompile(`\b([A-Z0-9_]*(?:TOKEN|PASSWORD|PASSWD|SECRET|KEY|CREDENTIAL)[A-Z0-9_]*=)[^\s"',;]+`)
)

// scrub removes from b every secret value the redactor learnt, the status token's header value,
// bearer tokens and secret NAME=value assignments.
func (r *redactor) scrub(b []byte) []byte {
	secrets := make([]string, 0, len(r.secrets))
	for s := range r.secrets {
		secrets = append(secrets, s)
	}
	// The longest first: a secret that contains another is replaced whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		b = bytes.ReplaceAll(b, []byte(s), []byte(redacted))
	}
	b = tokenHeader.ReplaceAll(b, []byte("${1}"+redacted))
	b = bearer.ReplaceAll(b, []byte("${1}"+redacted))
	return envAssignment.ReplaceAll(b, []byte("${1}"+redacted))
}
