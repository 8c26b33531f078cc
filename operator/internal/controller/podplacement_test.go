package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// placementHarness is a reconciler on a fake API server, a pod that has just become ready (as
// the transitions predicate leaves it) and the answer its /status gives.
type placementHarness struct {
	r      *PodHealthReconciler
	c      client.Client
	pod    *corev1.Pod
	answer *podcontract.DataplaneStatus
	err    error
	reads  int
	now    time.Time
}

func newPlacementHarness(t *testing.T) *placementHarness {
	t.Helper()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	h := &placementHarness{pod: healthPod(true)}
	h.c = fake.NewClientBuilder().WithScheme(s).WithObjects(h.pod).Build()
	h.restart()
	return h
}

// restart is a new replica (or this one restarted): nothing remembered.
func (h *placementHarness) restart() {
	h.now = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	h.r = &PodHealthReconciler{Reader: h.c, Writer: h.c, Instance: "kube-fstack-test", Now: func() time.Time { return h.now },
		ReadStatus: func(context.Context, *corev1.Pod) (*podcontract.DataplaneStatus, error) {
			h.reads++
			return h.answer, h.err
		},
		pods: map[types.UID]*podHealth{}}
}

// firstReady reconciles the pod's first readiness.
func (h *placementHarness) firstReady(t *testing.T) {
	t.Helper()
	h.r.pods[h.pod.UID] = &podHealth{first: true, budget: newPodBudget()}
	h.reconcile(t)
}

func (h *placementHarness) reconcile(t *testing.T) {
	t.Helper()
	if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(h.pod)}); err != nil {
		t.Fatal(err)
	}
}

// events are the Events about the pod, as "type reason note".
func (h *placementHarness) events(t *testing.T) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := h.c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func sharedStatus(warnings ...string) *podcontract.DataplaneStatus {
	return &podcontract.DataplaneStatus{Generation: 1, Ready: true, Reason: "ready",
		Placement: &podcontract.Placement{LcoreCPUs: []int{0, 1}, Warnings: warnings}}
}

// A pod whose placement shares CPUs gets one Warning at its first readiness, in the words of
// kubectl fstack status; the restarts it made while starting are no fault's; the same placement
// seen again (a fault's return, another replica, a restarted operator) is not said again.
func TestPodHealthSaysSharedCPUsOnce(t *testing.T) {
	h := newPlacementHarness(t)
	warning := podcontract.PlacementWarnings([]int{0, 1}, nil, []int{0, 1})[0]
	h.answer = sharedStatus(warning)
	h.answer.Restarts.Dataplane = podcontract.RestartCount{Total: 1,
		Last: &podcontract.RestartRecord{Reason: "process_exit", Message: "exited while starting", Time: h.now.Add(-time.Second)}}
	h.firstReady(t)
	evs := h.events(t)
	if len(evs) != 1 || evs[0].Type != corev1.EventTypeWarning || evs[0].Reason != EventCPUsShared ||
		evs[0].Note != "CPUs shared: "+warning || evs[0].Note != h.answer.Placement.SharedCPUs() {
		t.Fatalf("events %+v, want one Warning %s saying %q", evs, EventCPUsShared, h.answer.Placement.SharedCPUs())
	}
	if e := evs[0]; e.Regarding.UID != h.pod.UID || e.Regarding.Name != h.pod.Name || e.ReportingController != reportingController ||
		!strings.HasPrefix(e.Name, h.pod.Name+".cpusshared-") {
		t.Errorf("event %+v", e)
	}

	// A fault and its return: the return's read shows the same placement.
	hp := h.r.pods[h.pod.UID]
	if hp == nil || hp.placementSaid == "" {
		t.Fatal("the pod whose CPUs are shared is not remembered as told")
	}
	hp.down, hp.downSince = true, h.now
	h.now = h.now.Add(3 * time.Second)
	h.reconcile(t)
	var reasons []string
	for _, e := range h.events(t) {
		reasons = append(reasons, e.Reason)
	}
	slices.Sort(reasons)
	if !slices.Equal(reasons, []string{EventCPUsShared, EventDataplaneReady}) {
		t.Fatalf("after a return: events %q, want the first and %s (the start's restart is no fault's)", reasons, EventDataplaneReady)
	}

	// Another replica, or this one restarted, sees a first readiness: the write finds the Event.
	h.restart()
	h.firstReady(t)
	n := 0
	for _, e := range h.events(t) {
		if e.Reason == EventCPUsShared {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d %s events after a second replica read the same placement, want 1", n, EventCPUsShared)
	}

	// A different placement (a new generation on other CPUs) is news.
	h.answer = sharedStatus("lcore CPU 3 is also polled by the switch's PMD thread")
	hp = h.r.pods[h.pod.UID]
	hp.down, hp.downSince = true, h.now
	h.reconcile(t)
	n = 0
	for _, e := range h.events(t) {
		if e.Reason == EventCPUsShared {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d %s events after the placement changed, want 2", n, EventCPUsShared)
	}
}

// A well-placed pod, and one whose /status cannot be read, cost one read at their first
// readiness and no API write, and are not remembered.
func TestPodHealthSaysNothingOfAWellPlacedPod(t *testing.T) {
	for name, c := range map[string]struct {
		answer *podcontract.DataplaneStatus
		err    error
	}{
		"well placed":        {answer: &podcontract.DataplaneStatus{Ready: true, Placement: &podcontract.Placement{LcoreCPUs: []int{3}, SwitchCPUs: []int{0}}}},
		"no placement":       {answer: &podcontract.DataplaneStatus{Ready: true}},
		"blank warnings":     {answer: sharedStatus("", "  ")},
		"no answer":          {err: errors.New("connection refused")},
		"an image without /": {err: errors.New("GET: HTTP 404")},
	} {
		t.Run(name, func(t *testing.T) {
			h := newPlacementHarness(t)
			h.answer, h.err = c.answer, c.err
			h.firstReady(t)
			if evs := h.events(t); len(evs) != 0 || h.reads != 1 {
				t.Fatalf("%d reads, events %+v; want 1 read, none", h.reads, evs)
			}
			if len(h.r.pods) != 0 {
				t.Errorf("memory %+v, want the pod forgotten", h.r.pods)
			}
		})
	}
}

// What a pod answers is its own to write: the note is printable and under the API's limit,
// whatever the warnings hold (the reader bounds them: 8 of 4 KiB).
func TestPodHealthSharedCPUsNoteIsBounded(t *testing.T) {
	h := newPlacementHarness(t)
	long := strings.Repeat("\x1b[2J\u202e\xff", 4<<10/6)
	h.answer = sharedStatus(long, long, long, long, long, long, long, long)
	h.firstReady(t)
	evs := h.events(t)
	if len(evs) != 1 {
		t.Fatalf("events %+v, want one", evs)
	}
	n := evs[0].Note
	if len(n) > eventNoteMax || !strings.HasPrefix(n, `CPUs shared: \x1b[2J\u202e\xff`) || !strings.HasSuffix(n, "...") {
		t.Errorf("note of %d bytes %q", len(n), n[:min(len(n), 80)])
	}
	for _, r := range n {
		if !unicode.IsPrint(r) {
			t.Fatalf("note holds %U", r)
		}
	}
}

// Every read of /status waits its turn within the rate shared by all pods (a Deployment
// scaled up by hundreds turns ready together): the burst at once, then one each 1/QPS, in the
// order asked, with no worker blocked (the wait is a requeue) and no turn reserved twice.
func TestPodHealthReadsTakeTurns(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &PodHealthReconciler{Now: func() time.Time { return now }, reads: newBucket(podHealthQPS, podHealthBurst)}
	pods := make([]*podHealth, podHealthBurst+3)
	for i := range pods {
		pods[i] = &podHealth{first: true}
		wait := r.readTurn(pods[i])
		want := time.Duration(max(0, i-podHealthBurst+1)) * time.Second / podHealthQPS
		if wait != want {
			t.Fatalf("pod %d waits %s, want %s", i, wait, want)
		}
	}
	last := pods[len(pods)-1]
	now = now.Add(time.Second / podHealthQPS)
	if wait := r.readTurn(last); wait != 2*time.Second/podHealthQPS {
		t.Fatalf("asked again before its turn: waits %s, want the rest of the same turn", wait)
	}
	now = now.Add(2 * time.Second / podHealthQPS)
	if wait := r.readTurn(last); wait != 0 || !last.readAt.IsZero() {
		t.Fatalf("at its turn: waits %s", wait)
	}
}
