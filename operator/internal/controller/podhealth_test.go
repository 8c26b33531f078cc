package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func healthPod(ready bool) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "p", UID: types.UID("u1")},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
			InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, Ready: ready}}}}
}

// Only a pod that was ready and is not, and its return, reach the reconciler: creation and the
// first readiness are dropped before any work (the pod-creation hot path stays free of it).
func TestPodHealthTransitions(t *testing.T) {
	r := &PodHealthReconciler{pods: map[types.UID]*podHealth{}}
	p := r.transitions()
	up, down := healthPod(true), healthPod(false)
	if p.Create(event.CreateEvent{Object: up}) || p.Generic(event.GenericEvent{Object: up}) {
		t.Error("a create or generic event passed")
	}
	if p.Update(event.UpdateEvent{ObjectOld: down, ObjectNew: up}) {
		t.Error("the first readiness passed")
	}
	if p.Update(event.UpdateEvent{ObjectOld: up, ObjectNew: up}) {
		t.Error("an update with no readiness change passed")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: up, ObjectNew: down}) || !r.pods["u1"].down {
		t.Error("ready to unready did not pass")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: down, ObjectNew: up}) {
		t.Error("the return after an unready did not pass")
	}
	if p.Delete(event.DeleteEvent{Object: up}) || len(r.pods) != 0 {
		t.Errorf("delete: memory %v", r.pods)
	}
}

// The reconciler records the supervisor's reason, what restarted in place since last seen, and
// the return; a pod's text is made printable and cut to the API's limit.
func TestPodHealthEvents(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	pod := healthPod(false)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(pod).Build()
	rec := events.NewFakeRecorder(10)
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	answer := &podcontract.DataplaneStatus{Reason: "port 0 (attachment net1): link down for 3s\x1b[2J",
		Restarts: podcontract.InPlaceRestarts{Dataplane: podcontract.RestartCount{Total: 4,
			Last: &podcontract.RestartRecord{Reason: "process_exit", Message: strings.Repeat("x", 2000), Time: now.Add(-2 * time.Second)}}}}
	var readErr error
	r := &PodHealthReconciler{Reader: c, Recorder: rec, Now: func() time.Time { return now },
		ReadStatus: func(context.Context, *corev1.Pod) (*podcontract.DataplaneStatus, error) { return answer, readErr },
		pods:       map[types.UID]*podHealth{"u1": {down: true, downSince: now}}}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := drain(rec)
	if len(got) != 2 || !strings.HasPrefix(got[0], "Warning RestartedInPlace the dataplane (a new F-Stack generation) restarted in place: 1 since last seen, 4 in all; last at 2025-01-02T03:04:03Z: process_exit: xxx") ||
		len(got[0]) > len("Warning RestartedInPlace ")+eventNoteMax ||
		got[1] != `Warning DataplaneNotReady dataplane not ready: port 0 (attachment net1): link down for 3s\x1b[2J` {
		t.Fatalf("events %q", got)
	}
	// Reconciled again while still down (another update queued it): nothing new to say.
	if _, err := r.Reconcile(context.Background(), req); err != nil || len(drain(rec)) != 0 {
		t.Fatalf("a second reconcile while down recorded events (err %v)", err)
	}
	// Back, /status unreadable: the return is still said, and no restart guessed.
	pod.Status.InitContainerStatuses[0].Ready = true
	if err := c.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	answer, readErr = nil, errors.New("connection refused")
	now = now.Add(5 * time.Second)
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := drain(rec); len(got) != 1 || got[0] != "Normal DataplaneReady dataplane ready again after 5s" {
		t.Fatalf("events %q", got)
	}
}

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
