package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// hashLen is how much of a config hash the table shows, as git shows commits.
const hashLen = 12

// statusRow is one pod of a StackInstance, or the StackInstance itself when no pod names it.
type statusRow struct {
	namespace, stack, ready, pod, node, hash, config, dataplane, restarts string
}

type statusTable struct{ rows []statusRow }

func newStatusTable() *statusTable { return &statusTable{} }

func (t *statusTable) addStack(si *fsv1.StackInstance, pods []corev1.Pod) {
	ready := si.Status.Ready
	if ready == "" {
		ready = fmt.Sprintf("%d/%d", si.Status.ReadyPods, si.Status.BoundPods)
	}
	base := statusRow{namespace: si.Namespace, stack: si.Name, ready: ready}
	if len(pods) == 0 {
		r := base
		r.pod = "<none>"
		t.rows = append(t.rows, r)
		return
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for i := range pods {
		p := &pods[i]
		r := base
		r.pod, r.node = p.Name, orDash(p.Spec.NodeName)
		r.hash, r.config = configColumns(p.Annotations[podcontract.ConfigHashAnnotation], si.Status.ConfigHash)
		r.dataplane, r.restarts = dataplaneColumns(p)
		t.rows = append(t.rows, r)
	}
}

// configColumns shows the pod's config hash and whether it is the StackInstance's current one.
func configColumns(podHash, current string) (hash, config string) {
	switch {
	case podHash == "":
		return "-", "unknown (not injected)"
	case current == "":
		return short(podHash), "unknown (no current hash yet)"
	case podHash == current:
		return short(podHash), "current"
	default:
		return short(podHash), "old (current " + short(current) + ")"
	}
}

// dataplaneColumns describes the dataplane container as kubectl describe would, in one word or
// two, and its restart count.
func dataplaneColumns(p *corev1.Pod) (state, restarts string) {
	if p.DeletionTimestamp != nil {
		state = "Terminating, "
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.Name != podcontract.DataplaneContainer {
			continue
		}
		return state + containerState(s), fmt.Sprint(s.RestartCount)
	}
	return state + "no status (pod " + orDash(string(p.Status.Phase)) + ")", "0"
}

func containerState(s corev1.ContainerStatus) string {
	switch {
	case s.State.Running != nil && s.Ready:
		return "Running, ready"
	case s.State.Running != nil:
		return "Running, not ready"
	case s.State.Waiting != nil:
		return "Waiting: " + orDash(s.State.Waiting.Reason)
	case s.State.Terminated != nil:
		return fmt.Sprintf("Terminated: %s (exit %d)", orDash(s.State.Terminated.Reason), s.State.Terminated.ExitCode)
	}
	return "unknown"
}

func (t *statusTable) write(w io.Writer, withNamespace bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	head := []string{"STACK", "READY", "POD", "NODE", "CONFIG-HASH", "CONFIG", "DATAPLANE", "RESTARTS"}
	if withNamespace {
		head = append([]string{"NAMESPACE"}, head...)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range t.rows {
		cols := []string{r.stack, r.ready, r.pod, r.node, r.hash, r.config, r.dataplane, r.restarts}
		if withNamespace {
			cols = append([]string{r.namespace}, cols...)
		}
		// Annotations and status are anyone's with the right to edit them: printed as safe
		// text, and a tab in one cannot shift the columns.
		for i := range cols {
			cols[i] = safe(cols[i])
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
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
