package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

const (
	// startupGrace is how long a dataplane that has not been ready yet is "starting" rather
	// than failed: F-Stack's start with the probe agent's attach takes seconds, an image pull
	// is before the container runs.
	startupGrace = 2 * time.Minute
	// recentRestart is how far back an in-place restart is news: long enough that a fault
	// seen in the morning is still listed when someone looks, short enough that a pod that
	// recovered once last week is not flagged forever.
	recentRestart = time.Hour
)

// judgePods lists the bound pods whose supervisor says the dataplane needs attention; a pod that
// is not ready (past its start) or has a port down is a problem.
func (r *DoctorReport) judgePods(in doctorInput) {
	r.PodNotes = in.statuses.notes()
	r.PodsChecked = len(in.statuses.got)
	for i := range in.pods {
		p := &in.pods[i]
		sv := in.statuses.got[podKey{p.Namespace, p.Name}]
		if sv == nil || !onNamedNode(in, p) {
			continue
		}
		d := PodDoctor{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Ready: sv.Ready, Reason: sv.Reason,
			DownPorts: sv.DownPorts(), InPlaceRestarts: int64(sv.Restarts.Dataplane.Total), AppRestarts: sv.AppRestarts()}
		d.LastRestart, d.LastOf = latestRestart(sv)
		key := p.Namespace + "/" + p.Name
		switch {
		case len(d.DownPorts) > 0:
			d.Status, d.Detail = string(nodecheck.Fail), downPortsText(d.DownPorts, in.now)
			if !sv.Ready {
				d.Detail = "not ready: " + sv.Reason
			} else {
				d.Detail += " yet the dataplane reports ready (a dataplane image without the link watch: recreate the pod)"
			}
		case !sv.Ready && dataplaneStarting(p, sv, in.now):
			d.Status, d.Detail = string(nodecheck.Warn), "starting: "+sv.Reason
		case !sv.Ready:
			d.Status, d.Detail = string(nodecheck.Fail), "not ready: "+sv.Reason
		case d.LastRestart != nil && in.now.Sub(d.LastRestart.Time) < recentRestart:
			d.Status = string(nodecheck.Warn)
			d.Detail = fmt.Sprintf("restarted in place %s ago", in.now.Sub(d.LastRestart.Time).Round(time.Second))
		default:
			continue
		}
		if d.LastRestart != nil && in.now.Sub(d.LastRestart.Time) < recentRestart {
			d.Detail += fmt.Sprintf("; in-place restarts: dataplane %d, apps %d; last %s: %s: %s", d.InPlaceRestarts, d.AppRestarts,
				d.LastOf, d.LastRestart.Reason, d.LastRestart.Message)
		}
		if d.Status == string(nodecheck.Fail) {
			r.Problems = append(r.Problems, fmt.Sprintf("pod %s on node %s: %s", key, orDash(d.Node), podcontract.Clip(d.Detail, 300)))
		}
		r.Pods = append(r.Pods, d)
	}
	sort.Slice(r.Pods, func(i, j int) bool {
		a, b := r.Pods[i], r.Pods[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
}

// onNamedNode: with a NODE named, only its pods are judged.
func onNamedNode(in doctorInput, p *corev1.Pod) bool {
	return !in.named || len(in.nodes) != 1 || p.Spec.NodeName == in.nodes[0].Name
}

// dataplaneStarting: the supervisor has not been ready yet in this container (no generation
// restarted) and the container started within startupGrace.
func dataplaneStarting(p *corev1.Pod, sv *podcontract.DataplaneStatus, now time.Time) bool {
	if sv.Restarts.Dataplane.Total > 0 {
		return false
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.Name == podcontract.DataplaneContainer && s.State.Running != nil {
			return now.Sub(s.State.Running.StartedAt.Time) < startupGrace
		}
	}
	return false
}

// latestRestart is the latest in-place restart of the dataplane or an app, and whose it was.
func latestRestart(sv *podcontract.DataplaneStatus) (*podcontract.RestartRecord, string) {
	last, of := sv.Restarts.Dataplane.Last, "dataplane"
	names := make([]string, 0, len(sv.Restarts.Apps))
	for n := range sv.Restarts.Apps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if l := sv.Restarts.Apps[n].Last; l != nil && (last == nil || l.Time.After(last.Time)) {
			last, of = l, "app "+n
		}
	}
	return last, of
}

func downPortsText(ports []podcontract.PortStatus, now time.Time) string {
	var s []string
	for _, p := range ports {
		t := fmt.Sprintf("port %d (attachment %s) link down", p.Port, p.Attachment)
		if p.DownSince != nil {
			t += fmt.Sprintf(" for %s", now.Sub(*p.DownSince).Round(time.Second))
		}
		s = append(s, t)
	}
	return strings.Join(s, ", ")
}

// writePods prints the pods that need attention, or that none does.
func (r *DoctorReport) writePods(w io.Writer, o doctorTable) error {
	if r.PodsChecked == 0 {
		return nil // no running bound pod answered: the warnings on stderr say why, if any ran
	}
	fmt.Fprintln(w)
	if len(r.Pods) == 0 {
		_, err := fmt.Fprintf(w, "pods: %d running with a readable /status, every dataplane ready with its ports up, no in-place restart in the last hour\n",
			r.PodsChecked)
		return err
	}
	fmt.Fprintf(w, "pods: %d of %d running need attention\n", len(r.Pods), r.PodsChecked)
	rows := make([][]string, 0, len(r.Pods))
	for _, p := range r.Pods {
		rows = append(rows, []string{strings.ToUpper(p.Status), p.Namespace + "/" + p.Name, orDash(p.Node), p.Detail})
	}
	return o.printIndented(w, []string{"STATUS", "POD", "NODE", "DETAIL"}, -1, rows)
}
