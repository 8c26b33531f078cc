// Package inject turns a Pod that names a StackInstance into a Pod that runs it: the dataplane
// as a native sidecar, the volumes the DPDK primary and its secondaries must share, the shim in
// the app containers, and resources that make the pod Guaranteed. It is pure (no API calls), so
// the mutating webhook and `kubectl fstack inject` give the same result, and idempotent: a pod
// that carries the status annotation is returned unchanged.
package inject

import (
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Config holds the injector's settings (operator flags, CLI flags).
type Config struct {
	// Image is the dataplane image used when the StackInstance names none.
	Image string
	// ImagePullPolicy of the dataplane container; empty leaves the cluster default.
	ImagePullPolicy corev1.PullPolicy
	// HostSocketRoot is the CNI plugin's socket root on the node, which no pod may mount.
	HostSocketRoot string
	// DataplaneMemory is the dataplane's memory when the StackInstance sets none: the FreeBSD stack
	// lives on the ordinary heap, not in hugepages.
	DataplaneMemory resource.Quantity
	// AllowedImages are the image prefixes a StackInstance's spec.dataplane.image may start
	// with; empty allows any. Image is always allowed.
	AllowedImages []string
	// NodeAffinity adds the required node affinity on the node agent's labels (affinity.go);
	// off where no node agent publishes them.
	NodeAffinity bool
	// DefaultDataNetwork is the DataNetwork of a port that names none (spec.ports[].dataNetwork).
	DefaultDataNetwork string
	// Logging is the log format and level of the supervisor and the launchers, passed to them
	// as logging.EnvFormat and logging.EnvLevel (the operator's own, by default).
	Logging logging.Options
	// StatusTokens are the random bytes of each pod's status token (statustoken.go); nil is
	// crypto/rand. The goldens' tests give a fixed stream.
	StatusTokens io.Reader
	// OmitStatusToken injects no status token: `kubectl fstack inject` writes manifests, whose
	// pod template would give every replica the same token, and the webhook gives each pod its
	// own when it is created.
	OmitStatusToken bool
}

// logEnv passes the log's format and level to a container the injection makes or changes; the
// defaults (text, info) need no variable.
func (c *Config) logEnv() []corev1.EnvVar {
	var env []corev1.EnvVar
	if f := c.Logging.Format; f != "" && f != logging.FormatText {
		env = append(env, corev1.EnvVar{Name: logging.EnvFormat, Value: f})
	}
	if l := c.Logging.Level; l != "" && l != "info" {
		env = append(env, corev1.EnvVar{Name: logging.EnvLevel, Value: l})
	}
	return env
}

// DefaultConfig is what the operator and the CLI use unless told otherwise.
func DefaultConfig() Config {
	return Config{
		Image:           "localhost/kube-fstack/dataplane:dev",
		HostSocketRoot:  podcontract.HostSocketRoot,
		DataplaneMemory: resource.MustParse("1Gi"),
		NodeAffinity:    true,
	}
}

// Decision says why a pod was or was not injected.
type Decision string

const (
	// Injected: the pod now runs the stack.
	Injected Decision = "injected"
	// SkippedNoStack: the pod names no StackInstance.
	SkippedNoStack Decision = "no-stack"
	// SkippedOptOut: the pod carries kubefstack.io/inject=false.
	SkippedOptOut Decision = "opt-out"
	// SkippedAlreadyInjected: the pod carries the status annotation.
	SkippedAlreadyInjected Decision = "already-injected"
)

// RejectError lists why a pod cannot run the stack, each problem with its field path.
type RejectError struct {
	Stack string
	Errs  field.ErrorList
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("cannot inject StackInstance %q: %s", e.Stack, e.Errs.ToAggregate().Error())
}

// StackName is the StackInstance a pod names, or "".
func StackName(pod *corev1.Pod) string { return pod.Labels[fsv1.StackLabel] }

// Decide says whether pod should be injected, before any StackInstance is looked up.
func Decide(pod *corev1.Pod) Decision {
	switch {
	case pod.Annotations[fsv1.StatusAnnotation] != "":
		return SkippedAlreadyInjected
	case pod.Annotations[fsv1.InjectAnnotation] == "false":
		return SkippedOptOut
	case StackName(pod) == "":
		return SkippedNoStack
	}
	return Injected
}

// Inject returns a copy of pod that runs stack. Pods that Decide skips come back unchanged (as a
// copy) with that decision. A pod that cannot run the stack gets a *RejectError.
func Inject(pod *corev1.Pod, stack *fsv1.StackInstance, cfg Config) (*corev1.Pod, Decision, error) {
	if d := Decide(pod); d != Injected {
		return skipped(pod, d, cfg)
	}
	prep, err := Prepare(stack, cfg)
	if err != nil {
		return nil, "", err
	}
	return prep.Inject(pod)
}

// Inject is Inject with the StackInstance already prepared. The pod serves the stack's static
// addresses; a stack with a pool is refused (only the admission webhook, which claims an
// address per pod, can inject it: InjectAddresses).
func (p *Prepared) Inject(pod *corev1.Pod) (*corev1.Pod, Decision, error) {
	if d := Decide(pod); d != Injected {
		return skipped(pod, d, p.cfg)
	}
	addrs, err := p.staticAddresses()
	if err != nil {
		return nil, "", err
	}
	return p.InjectAddresses(pod, addrs)
}

func (p *Prepared) inject(pod *corev1.Pod) (*corev1.Pod, Decision, error) {
	out := pod.DeepCopy()
	plan, err := newPlan(out, p)
	if err != nil {
		return nil, "", err
	}
	plan.apply()
	return out, Injected, nil
}

// skipped returns a copy of a pod that is not injected, once it passes CheckSkipped.
func skipped(pod *corev1.Pod, d Decision, cfg Config) (*corev1.Pod, Decision, error) {
	if errs := CheckSkipped(pod, d, cfg); len(errs) > 0 {
		return nil, "", &RejectError{Stack: StackName(pod), Errs: errs}
	}
	return pod.DeepCopy(), d, nil
}

// Status is what the status annotation records.
type Status struct {
	Stack          string   `json:"stack"`
	ConfigHash     string   `json:"configHash"`
	Dataplane      string   `json:"dataplane"`
	ShimContainers []string `json:"shimContainers,omitempty"`
	Volumes        []string `json:"volumes"`
	// Program is set when a program container became the dataplane (spec.program).
	Program *ProgramStatus `json:"program,omitempty"`
}

// ReadStatus parses the status annotation of an injected pod.
func ReadStatus(pod *corev1.Pod) (*Status, error) {
	raw := pod.Annotations[fsv1.StatusAnnotation]
	if raw == "" {
		return nil, nil
	}
	var s Status
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", fsv1.StatusAnnotation, err)
	}
	return &s, nil
}
