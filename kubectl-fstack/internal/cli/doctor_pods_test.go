package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// doctor judges the bound pods by their supervisor's /status: a port down or a dataplane not
// ready past its start fails (exit 1) with the supervisor's reason; a start in progress and a
// recent in-place restart are warnings; a pod long healthy is not listed.
func TestDoctorJudgesPodsByTheirSupervisor(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 10, 0, 0, time.UTC)
	pod := func(name string, started time.Time) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name}, Spec: corev1.PodSpec{NodeName: "node-a"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}}}
	}
	long := now.Add(-time.Hour * 5)
	linkDown := supervisorStatus() // port 0 down, restarted 6 minutes before now
	stuck := &podcontract.DataplaneStatus{Generation: 1, Reason: "waiting for F-Stack process 0: no zone yet"}
	starting := &podcontract.DataplaneStatus{Generation: 1, Reason: "starting F-Stack process 0"}
	restarted := supervisorStatus()
	restarted.Ready, restarted.Reason, restarted.Ports = true, "ready", []podcontract.PortStatus{{Port: 0, Attachment: "net1", LinkUp: true}}
	oldRestart := supervisorStatus()
	oldRestart.Ready, oldRestart.Reason, oldRestart.Ports = true, "ready", nil
	for _, c := range []*podcontract.RestartCount{&oldRestart.Restarts.Dataplane} {
		c.Last = &podcontract.RestartRecord{Reason: "process_exit", Time: now.Add(-2 * time.Hour)}
	}
	oldRestart.Restarts.Apps = nil
	in := doctorInput{now: now,
		pods: []corev1.Pod{pod("link-down", long), pod("stuck", long), pod("starting", now.Add(-10*time.Second)),
			pod("restarted", long), pod("healthy", long), pod("old-restart", long), pod("unread", long)},
		statuses: podStatuses{got: map[podKey]*podcontract.DataplaneStatus{
			{"web", "link-down"}: linkDown, {"web", "stuck"}: stuck, {"web", "starting"}: starting,
			{"web", "restarted"}: restarted, {"web", "healthy"}: {Generation: 1, Ready: true, Reason: "ready"}, {"web", "old-restart"}: oldRestart},
			errs: map[podKey]error{{"web", "unread"}: &statusError{statusUnreachable, errDial}}}}
	r := buildDoctorReport(in)
	got := map[string]PodDoctor{}
	for _, p := range r.Pods {
		got[p.Name] = p
	}
	for name, want := range map[string]struct{ status, detail string }{
		"link-down": {"fail", "not ready: port 0 (attachment net1): link down for 12s: the vhost-user peer (OVS) went away; reconnecting; in-place restarts: dataplane 2, apps 1; last dataplane: process_exit: F-Stack process 0 (primary) exited: signal: killed"},
		"stuck":     {"fail", "not ready: waiting for F-Stack process 0: no zone yet"},
		"starting":  {"warn", "starting: starting F-Stack process 0"},
		"restarted": {"warn", "restarted in place 5m55s ago; in-place restarts: dataplane 2, apps 1; last dataplane: process_exit"},
	} {
		if p, ok := got[name]; !ok || p.Status != want.status || !strings.HasPrefix(p.Detail, want.detail) {
			t.Errorf("%s: %+v; want %s %q", name, p, want.status, want.detail)
		}
	}
	if len(r.Pods) != 4 || r.PodsChecked != 6 {
		t.Errorf("%d pods listed of %d checked; want 4 of 6 (healthy and old-restart not listed): %+v", len(r.Pods), r.PodsChecked, r.Pods)
	}
	if len(r.Problems) != 2 || !strings.HasPrefix(r.Problems[0], "pod web/link-down on node node-a: not ready: port 0") ||
		!strings.HasPrefix(r.Problems[1], "pod web/stuck on node node-a: not ready: waiting") {
		t.Errorf("problems %q", r.Problems)
	}
	if len(r.PodNotes) != 1 || !strings.Contains(r.PodNotes[0], "pod web/unread: the API server could not reach the pod's port") {
		t.Errorf("notes %q", r.PodNotes)
	}
	var out bytes.Buffer
	if err := r.writeTable(&out, doctorTable{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pods: 4 of 6 running need attention",
		"  STATUS   POD             NODE     DETAIL\n",
		"  FAIL     web/link-down   node-a   not ready: port 0 (attachment net1): link down for 12s",
		"  WARN     web/starting    node-a   starting: starting F-Stack process 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}

	// With a NODE named, only its pods are judged.
	in.named, in.nodes = true, []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}}
	if r := buildDoctorReport(in); len(r.Pods) != 0 || len(r.Problems) != 0 {
		t.Errorf("doctor node-b judged node-a's pods: %+v %q", r.Pods, r.Problems)
	}

	// A port down while the supervisor says ready: an image without the link watch.
	blind := supervisorStatus()
	blind.Ready, blind.Reason = true, "ready"
	r = buildDoctorReport(doctorInput{now: now, pods: []corev1.Pod{pod("blind", long)},
		statuses: podStatuses{got: map[podKey]*podcontract.DataplaneStatus{{"web", "blind"}: blind}}})
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "port 0 (attachment net1) link down for 6m7s yet the dataplane reports ready") {
		t.Errorf("problems %q", r.Problems)
	}
}

var errDial = errorString("HTTP 503: error trying to reach service: dial tcp 10.0.0.9:9180: connect: connection refused")

type errorString string

func (e errorString) Error() string { return string(e) }
