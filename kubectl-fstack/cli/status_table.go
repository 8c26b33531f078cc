package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// hashLen is how much of a config hash the table shows, as git shows commits.
const hashLen = 12

// StackStatusList is what `status -o json|yaml` prints: every StackInstance shown and its pods.
type StackStatusList struct {
	metav1.TypeMeta `json:",inline"`
	Items           []StackStatus `json:"items"`
}

// StackStatus is one StackInstance.
type StackStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Ready is the StackInstance's status.ready (ready/bound pods).
	Ready string `json:"ready"`
	// ConfigHash is the hash of the config the StackInstance's spec renders now (status.configHash).
	ConfigHash string `json:"configHash,omitempty"`
	// Pods are the pods labelled kubefstack.io/stack with its name, by name.
	Pods []PodStatus `json:"pods"`
}

// PodStatus is one pod of a StackInstance.
type PodStatus struct {
	Name string `json:"name"`
	// Node is spec.nodeName, empty while unscheduled.
	Node string `json:"node,omitempty"`
	IP   string `json:"ip,omitempty"`
	// ConfigHash is the hash the injector admitted the pod with, empty if it was not injected.
	ConfigHash string `json:"configHash,omitempty"`
	// Config is "current" (the StackInstance's hash), "old" (recreate the pod to apply the
	// spec) or "unknown" (not injected, or the StackInstance has no hash yet).
	Config      string          `json:"config"`
	Terminating bool            `json:"terminating,omitempty"`
	Dataplane   DataplaneStatus `json:"dataplane"`
	// Program is set when the pod's dataplane is a program linked with libfstack (the
	// StackInstance's spec.program): its mode and the name its container had before it became
	// the dataplane, from the pod's kubefstack.io/status annotation.
	Program *inject.ProgramStatus `json:"program,omitempty"`
}

// DataplaneStatus is the pod's dataplane container.
type DataplaneStatus struct {
	// State is "running", "waiting", "terminated", or "unknown" when the pod has no status for it.
	State    string `json:"state"`
	Ready    bool   `json:"ready"`
	Reason   string `json:"reason,omitempty"`
	ExitCode *int32 `json:"exitCode,omitempty"`
	Restarts int32  `json:"restarts"`
	Image    string `json:"image,omitempty"`
}

func newStackStatusList() *StackStatusList {
	return &StackStatusList{TypeMeta: metav1.TypeMeta{APIVersion: OutputGroupVersion.String(), Kind: "StackStatusList"}, Items: []StackStatus{}}
}

func (l *StackStatusList) addStack(si *fsv1.StackInstance, pods []corev1.Pod) {
	ready := si.Status.Ready
	if ready == "" {
		ready = fmt.Sprintf("%d/%d", si.Status.ReadyPods, si.Status.BoundPods)
	}
	s := StackStatus{Namespace: si.Namespace, Name: si.Name, Ready: ready, ConfigHash: si.Status.ConfigHash, Pods: []PodStatus{}}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for i := range pods {
		p := &pods[i]
		ps := PodStatus{Name: p.Name, Node: p.Spec.NodeName, IP: p.Status.PodIP, Terminating: p.DeletionTimestamp != nil,
			ConfigHash: p.Annotations[podcontract.ConfigHashAnnotation]}
		switch {
		case ps.ConfigHash == "" || si.Status.ConfigHash == "":
			ps.Config = "unknown"
		case ps.ConfigHash == si.Status.ConfigHash:
			ps.Config = "current"
		default:
			ps.Config = "old"
		}
		ps.Dataplane = dataplaneStatus(p)
		if st, err := inject.ReadStatus(p); err == nil && st != nil {
			ps.Program = st.Program
		}
		s.Pods = append(s.Pods, ps)
	}
	l.Items = append(l.Items, s)
}

func dataplaneStatus(p *corev1.Pod) DataplaneStatus {
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.Name != podcontract.DataplaneContainer {
			continue
		}
		d := DataplaneStatus{State: "unknown", Ready: s.Ready, Restarts: s.RestartCount, Image: s.Image}
		switch {
		case s.State.Running != nil:
			d.State = "running"
		case s.State.Waiting != nil:
			d.State, d.Reason = "waiting", s.State.Waiting.Reason
		case s.State.Terminated != nil:
			code := s.State.Terminated.ExitCode
			d.State, d.Reason, d.ExitCode = "terminated", s.State.Terminated.Reason, &code
		}
		return d
	}
	return DataplaneStatus{State: "unknown", Reason: "no status (pod " + orDash(string(p.Status.Phase)) + ")"}
}

// configColumns shows the pod's config hash and whether it is the StackInstance's current one.
func configColumns(p PodStatus, current string, full bool) (hash, config string) {
	cut := short
	if full {
		cut = func(h string) string { return h }
	}
	switch {
	case p.ConfigHash == "":
		return "-", "unknown (not injected)"
	case current == "":
		return cut(p.ConfigHash), "unknown (no current hash yet)"
	case p.Config == "current":
		return cut(p.ConfigHash), "current"
	default:
		return cut(p.ConfigHash), "old (current " + cut(current) + ")"
	}
}

// dataplaneColumns describes the dataplane container as kubectl describe would, in one word or
// two, and its restart count.
func dataplaneColumns(p PodStatus) (state, restarts string) {
	if p.Terminating {
		state = "Terminating, "
	}
	d := p.Dataplane
	switch {
	case d.State == "running" && d.Ready:
		state += "Running, ready"
	case d.State == "running":
		state += "Running, not ready"
	case d.State == "waiting":
		state += "Waiting: " + orDash(d.Reason)
	case d.State == "terminated":
		state += fmt.Sprintf("Terminated: %s (exit %d)", orDash(d.Reason), *d.ExitCode)
	case d.Reason != "":
		state += d.Reason
	default:
		state += "unknown"
	}
	if p.Program != nil {
		state += fmt.Sprintf(" (program %s, was container %s)", p.Program.Mode, p.Program.Container)
	}
	return state, fmt.Sprint(d.Restarts)
}

// writeTable prints the list as the table; wide adds the pod's IP and the dataplane's image and
// shows whole config hashes.
func (l *StackStatusList) writeTable(w io.Writer, withNamespace, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	head := []string{"STACK", "READY", "POD", "NODE", "CONFIG-HASH", "CONFIG", "DATAPLANE", "RESTARTS"}
	if wide {
		head = append(head, "IP", "IMAGE")
	}
	if withNamespace {
		head = append([]string{"NAMESPACE"}, head...)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	row := func(s StackStatus, cols []string) {
		cols = append([]string{s.Name, s.Ready}, cols...)
		if withNamespace {
			cols = append([]string{s.Namespace}, cols...)
		}
		// Annotations and status are anyone's with the right to edit them: printed as safe
		// text, and a tab in one cannot shift the columns.
		for i := range cols {
			cols[i] = safe(cols[i])
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	for _, s := range l.Items {
		if len(s.Pods) == 0 {
			cols := []string{"<none>", "", "", "", "", ""}
			if wide {
				cols = append(cols, "", "")
			}
			row(s, cols)
			continue
		}
		for _, p := range s.Pods {
			hash, config := configColumns(p, s.ConfigHash, wide)
			state, restarts := dataplaneColumns(p)
			cols := []string{p.Name, orDash(p.Node), hash, config, state, restarts}
			if wide {
				cols = append(cols, orDash(p.IP), orDash(p.Dataplane.Image))
			}
			row(s, cols)
		}
	}
	return tw.Flush()
}

func short(h string) string {
	if len(h) > hashLen {
		return h[:hashLen]
	}
	return h
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
