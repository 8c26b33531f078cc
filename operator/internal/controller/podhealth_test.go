package controller

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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

// Only a pod that was ready and is not, its return, and its first readiness (for its
// placement) reach the reconciler: its creation and every other update are dropped before any
// work (the pod-creation hot path stays free of it).
func TestPodHealthTransitions(t *testing.T) {
	r := &PodHealthReconciler{pods: map[types.UID]*podHealth{}}
	p := r.transitions()
	up, down := healthPod(true), healthPod(false)
	if p.Create(event.CreateEvent{Object: up}) || p.Generic(event.GenericEvent{Object: up}) || len(r.pods) != 0 {
		t.Error("a create or generic event passed")
	}
	if p.Update(event.UpdateEvent{ObjectOld: down, ObjectNew: down}) || len(r.pods) != 0 {
		t.Error("an update of a pod not yet ready passed")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: down, ObjectNew: up}) || r.pods["u1"] == nil || !r.pods["u1"].first || r.pods["u1"].down {
		t.Errorf("the first readiness did not pass, to read the placement: memory %+v", r.pods["u1"])
	}
	delete(r.pods, "u1") // read, well placed: forgotten, as Reconcile does
	if p.Update(event.UpdateEvent{ObjectOld: up, ObjectNew: up}) {
		t.Error("an update with no readiness change passed")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: up, ObjectNew: down}) || !r.pods["u1"].down {
		t.Error("ready to unready did not pass")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: down, ObjectNew: up}) {
		t.Error("the return after an unready did not pass")
	}
	r.pods["u1"].down = false // reconciled
	if p.Update(event.UpdateEvent{ObjectOld: down, ObjectNew: up}) {
		t.Error("a readiness neither first nor after an unready seen passed")
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
	rec := &eventLog{c: c}
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	answer := &podcontract.DataplaneStatus{Reason: "port 0 (attachment net1): link down for 3s\x1b[2J",
		Restarts: podcontract.InPlaceRestarts{Dataplane: podcontract.RestartCount{Total: 4,
			Last: &podcontract.RestartRecord{Reason: "process_exit", Message: strings.Repeat("x", 2000), Time: now.Add(-2 * time.Second)}}}}
	var readErr error
	r := &PodHealthReconciler{Reader: c, Writer: c, Instance: "kube-fstack-test", Now: func() time.Time { return now },
		ReadStatus: func(context.Context, *corev1.Pod) (*podcontract.DataplaneStatus, error) { return answer, readErr },
		pods:       map[types.UID]*podHealth{"u1": {down: true, downSince: now, budget: newPodBudget()}}}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := rec.drain(t)
	if len(got) != 2 || !strings.HasPrefix(got[1], "Warning RestartedInPlace the dataplane (a new F-Stack generation) restarted in place: 1 since last seen, 4 in all; last at 2025-01-02T03:04:03Z: process_exit: xxx") ||
		len(got[1]) > len("Warning RestartedInPlace ")+eventNoteMax ||
		got[0] != `Warning DataplaneNotReady dataplane not ready: port 0 (attachment net1): link down for 3s\x1b[2J` {
		t.Fatalf("events %q", got)
	}
	// Reconciled again while still down (another update queued it): nothing new to say.
	if _, err := r.Reconcile(context.Background(), req); err != nil || len(rec.drain(t)) != 0 {
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
	if got := rec.drain(t); len(got) != 1 || got[0] != "Normal DataplaneReady dataplane ready again after 5s" {
		t.Fatalf("events %q", got)
	}
}

// eventLog reads the Events written to the fake client, as "type reason note", sorted, and
// deletes them so the next drain sees only what came after.
type eventLog struct{ c client.Client }

func (l *eventLog) drain(t *testing.T) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := l.c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range list.Items {
		e := &list.Items[i]
		if e.Regarding.Name != "p" || e.Regarding.UID != "u1" || e.ReportingController != "kube-fstack" || e.ReportingInstance != "kube-fstack-test" || e.Action == "" {
			t.Errorf("event %+v", e)
		}
		out = append(out, e.Type+" "+e.Reason+" "+e.Note)
		if err := l.c.Delete(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(out)
	return out
}

// A pod whose link flaps all day costs ten events at once, then one a minute.
func TestPodHealthEventBudget(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &podHealth{budget: newPodBudget()}
	r := &PodHealthReconciler{Now: func() time.Time { return now }, pods: map[types.UID]*podHealth{"u1": h}}
	st := &podcontract.DataplaneStatus{Reason: "port 0 (attachment net1): link down for 1s"}
	n := 0
	for range 50 { // 50 flaps within a second: unready, then ready again
		h.down, h.downSince = true, now
		n += len(r.decide("u1", h, false, st, nil))
		n += len(r.decide("u1", h, true, st, nil))
	}
	if n != 10 {
		t.Fatalf("%d events for 50 flaps at once; want the budget's 10", n)
	}
	now = now.Add(time.Minute)
	h.down, h.downSince = true, now
	if got := r.decide("u1", h, false, st, nil); len(got) != 1 || got[0].reason != EventDataplaneNotReady {
		t.Fatalf("a minute later: %+v", got)
	}
}

// The supervisor answers /status to the node and to the holders of the pod's status token: the
// operator sends the token its cache kept of the pod (a valid one only: the pod's creator wrote
// it), and says why when it has none.
func TestPodHealthSendsThePodsStatusToken(t *testing.T) {
	token := strings.Repeat("0123456789abcdef", 4)
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent := r.Header.Get(podcontract.StatusTokenHeader)
		got.Store(sent)
		if r.URL.Path != podcontract.StatusPath || sent != token {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(`{"generation":2,"ready":false,"reason":"port 0 down"}`))
	}))
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])
	r := &PodHealthReconciler{Port: port, httpClient: newStatusClient()}
	withToken := func(v string) *corev1.Pod {
		p := healthPod(false)
		p.Status.PodIP = "127.0.0.1"
		p.Spec.InitContainers = []corev1.Container{{Name: podcontract.DataplaneContainer, Image: "dp",
			Env: []corev1.EnvVar{{Name: "OTHER", Value: "x"}, {Name: podcontract.EnvStatusToken, Value: v}}}}
		cached, err := TrimPod(p) // as the manager's cache holds it
		if err != nil {
			t.Fatal(err)
		}
		return cached.(*corev1.Pod)
	}
	st, err := r.read(context.Background(), withToken(token))
	if err != nil || st.Generation != 2 || got.Load() != token {
		t.Fatalf("read with the token: %+v, %v; sent %q", st, err, got.Load())
	}
	for name, v := range map[string]string{"none": "", "a header's injection": token + "\r\nX-Other: 1", "too long": strings.Repeat("a", podcontract.MaxStatusTokenLen+1)} {
		_, err := r.read(context.Background(), withToken(v))
		if err == nil || got.Load() != "" || !strings.Contains(err.Error(), "HTTP 403") || !strings.Contains(err.Error(), "no status token") {
			t.Errorf("%s: sent %q, error %v; want nothing sent and the missing token said", name, got.Load(), err)
		}
	}
}
