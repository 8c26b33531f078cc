package envtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/controller"
)

// supervisor stands in for the dataplane's supervisor, which cannot run here (F-Stack needs
// DPDK and a NIC; there is no kubelet to start it): it serves /status as the supervisor does,
// with what the test sets, on 127.0.0.1 at the port the suite's operator reads pods' /status
// (manager.Options.PodStatusPort), and the pods of these tests have 127.0.0.1 as their IP. As
// the supervisor, it answers only requests with the pod's status token: the one the suite's
// webhook gives every pod (fixtures.StatusTokens), which the operator's cache must keep.
var supervisor = &supervisorStandIn{}

type supervisorStandIn struct {
	mu     sync.Mutex
	answer *podcontract.DataplaneStatus
	reads  int
}

func (s *supervisorStandIn) start() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+podcontract.StatusPath, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.reads++
		if !podcontract.StatusTokenMatches(fixtures.StatusToken(), r.Header.Get(podcontract.StatusTokenHeader)) {
			http.Error(w, podcontract.StatusPath+" is "+podcontract.StatusTokenRefusal, http.StatusForbidden)
			return
		}
		if s.answer == nil {
			http.NotFound(w, nil)
			return
		}
		_ = json.NewEncoder(w).Encode(s.answer)
	})
	go func() { _ = http.Serve(l, mux) }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *supervisorStandIn) set(a *podcontract.DataplaneStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = a
}

func (s *supervisorStandIn) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// A bound pod's dataplane that goes unready after having been ready gets a Warning event with
// the supervisor's reason and one for the restart it made in place; when it is ready again, a
// Normal event and one for each count that grew since. The pod's creation costs the operator no
// read of /status, its first readiness one (for the placement) and no write for a well-placed
// pod: the stand-in counts the reads.
func TestDataplaneHealthEvents(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "health")
	testenv.CreateIfAbsent(t, k8s, si)
	supervisor.set(&podcontract.DataplaneStatus{Generation: 1, Ready: true, Reason: "ready",
		Placement: &podcontract.Placement{LcoreCPUs: []int{3}, SwitchCPUs: []int{0}}})
	before := supervisor.readCount()
	pod := statusPod(t, "health-a", si.Name, "node-a", corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, false, 0)
	setDataplane(t, pod, true) // first readiness: one read, no event
	waitReads(t, before+1)

	killed := time.Now().UTC().Truncate(time.Second)
	supervisor.set(&podcontract.DataplaneStatus{Generation: 2, Ready: false,
		Reason: "port 0 (attachment net1): link down for 3s: the vhost-user peer (OVS) went away; reconnecting",
		Restarts: podcontract.InPlaceRestarts{Dataplane: podcontract.RestartCount{Total: 1,
			Last: &podcontract.RestartRecord{Reason: "link_down", Message: "port 0 link down for 3s", Time: killed}}},
		Ports: []podcontract.PortStatus{{Port: 0, Attachment: "net1", DownSince: &killed}}})
	setDataplane(t, pod, false)
	waitEvent(t, pod, corev1.EventTypeWarning, controller.EventDataplaneNotReady,
		"dataplane not ready: port 0 (attachment net1): link down for 3s: the vhost-user peer (OVS) went away; reconnecting")
	waitEvent(t, pod, corev1.EventTypeWarning, controller.EventRestartedInPlace,
		"the dataplane (a new F-Stack generation) restarted in place: 1 since last seen, 1 in all; last at "+killed.Format(time.RFC3339)+": link_down: port 0 link down for 3s")

	// Back: the dataplane restarted once more and the launcher restarted nginx once.
	again := killed.Add(2 * time.Second)
	supervisor.set(&podcontract.DataplaneStatus{Generation: 3, Ready: true, Reason: "ready",
		Restarts: podcontract.InPlaceRestarts{
			Dataplane: podcontract.RestartCount{Total: 2, Last: &podcontract.RestartRecord{Reason: "process_exit", Message: "F-Stack process 0 (primary) exited: signal: killed", Time: again}},
			Apps:      map[string]podcontract.RestartCount{"nginx": {Total: 1, Last: &podcontract.RestartRecord{Reason: "exited", Message: "nginx exited: status 1", Time: again}}}},
		Ports: []podcontract.PortStatus{{Port: 0, Attachment: "net1", LinkUp: true}}})
	setDataplane(t, pod, true)
	waitEvent(t, pod, corev1.EventTypeNormal, controller.EventDataplaneReady, "dataplane ready again after ")
	waitEvent(t, pod, corev1.EventTypeWarning, controller.EventRestartedInPlace,
		"the dataplane (a new F-Stack generation) restarted in place: 1 since last seen, 2 in all; last at "+again.Format(time.RFC3339)+": process_exit: F-Stack process 0 (primary) exited: signal: killed")
	waitEvent(t, pod, corev1.EventTypeWarning, controller.EventRestartedInPlace, "the dataplane (a new F-Stack generation) restarted in place: 1 since last seen, 2 in all; last at "+again.Format(time.RFC3339)+": process_exit: F-Stack process 0 (primary) exited: signal: killed | app nginx restarted in place: 1 since last seen, 1 in all")
	// Two transitions, two reads, and the first readiness's: the creation made none.
	if n := supervisor.readCount() - before; n != 3 {
		t.Errorf("the operator read /status %d times; want 3 (the first readiness and one per transition)", n)
	}
	if evs := eventsAbout(t, pod, controller.EventCPUsShared); len(evs) != 0 {
		t.Errorf("a well-placed pod has %s events: %+v", controller.EventCPUsShared, evs)
	}

	// A dataplane image without /status: the event says the probe fails and why no reason.
	supervisor.set(nil)
	setDataplane(t, pod, false)
	waitEvent(t, pod, corev1.EventTypeWarning, controller.EventDataplaneNotReady,
		"dataplane not ready: the dataplane's readiness probe fails; its /status could not be read: GET http://127.0.0.1:")
	// Gone at once, as the kubelet (which envtest runs none of) would end it: it holds the
	// sample's static address, which one pod of the cluster may hold.
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// Issue 40 §1: what the supervisor could not keep apart is said in the pod's events. A pod whose
// /status placement says its lcores share CPUs gets one Warning CPUsShared event at its first
// readiness, in the words of kubectl fstack status's row (podcontract's SharedCPUs), and not
// again when a fault's return reads the same; a well-placed pod gets none.
func TestSharedCPUsEvent(t *testing.T) {
	ctx := context.Background()
	// Two pods at once, so a pool: of the network's, addresses no other test's pool reaches.
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace(optedInNS, "placement"), func(si *fsv1.StackInstance) {
		p := &si.Spec.Ports[0]
		p.IPv4 = &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: "10.56.3.1",
			Pool: &fsv1.IPPool{Ranges: []string{"10.56.3.200-10.56.3.201"}, PrefixLength: 24}}
		p.IPv6 = nil
	})
	testenv.CreateIfAbsent(t, k8s, si)
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}

	// Well placed: the lcore off the switch's CPU, a CPU left for the app.
	supervisor.set(&podcontract.DataplaneStatus{Generation: 1, Ready: true, Reason: "ready",
		Placement: &podcontract.Placement{LcoreCPUs: []int{1}, SwitchCPUs: []int{0}}})
	before := supervisor.readCount()
	good := statusPod(t, "placed-well", si.Name, "node-a", running, false, 0)
	setDataplane(t, good, true)
	waitReads(t, before+1)
	// The first readiness's reconcile is over once a later one's event is written (the queue
	// hands one pod to one worker at a time).
	supervisor.set(&podcontract.DataplaneStatus{Generation: 1, Reason: "port 0 (attachment net1): link down for 1s"})
	setDataplane(t, good, false)
	waitEvent(t, good, corev1.EventTypeWarning, controller.EventDataplaneNotReady, "dataplane not ready: port 0")
	if evs := eventsAbout(t, good, controller.EventCPUsShared); len(evs) != 0 {
		t.Errorf("a well-placed pod has %s events: %+v", controller.EventCPUsShared, evs)
	}

	// The lab's two-CPU pool under cpuPolicy Shared with two lcores, one the PMD's: the
	// supervisor's own warnings.
	placement := &podcontract.Placement{LcoreCPUs: []int{0, 1}, SwitchCPUs: []int{0},
		Warnings: podcontract.PlacementWarnings([]int{0, 1}, []int{0}, []int{0, 1})}
	shared := &podcontract.DataplaneStatus{Generation: 1, Ready: true, Reason: "ready", Placement: placement}
	supervisor.set(shared)
	bad := statusPod(t, "cpus-shared", si.Name, "node-a", running, false, 0)
	setDataplane(t, bad, true)
	want := placement.SharedCPUs()
	if len(placement.Warnings) != 2 || len(want) > 1000 {
		t.Fatalf("the test's placement: warnings %q, note of %d bytes", placement.Warnings, len(want))
	}
	waitEvent(t, bad, corev1.EventTypeWarning, controller.EventCPUsShared, want)

	// A fault and its return: the return's read shows the same placement, said already.
	supervisor.set(&podcontract.DataplaneStatus{Generation: 1, Reason: "port 0 (attachment net1): link down for 1s", Placement: placement})
	setDataplane(t, bad, false)
	waitEvent(t, bad, corev1.EventTypeWarning, controller.EventDataplaneNotReady, "dataplane not ready: port 0")
	supervisor.set(shared)
	setDataplane(t, bad, true)
	waitEvent(t, bad, corev1.EventTypeNormal, controller.EventDataplaneReady, "dataplane ready again after ")
	evs := eventsAbout(t, bad, controller.EventCPUsShared)
	if len(evs) != 1 || evs[0].Note != want || evs[0].Type != corev1.EventTypeWarning {
		t.Fatalf("%s events about the pod: %+v; want one, saying %q", controller.EventCPUsShared, evs, want)
	}
	for _, p := range []*corev1.Pod{good, bad} {
		if err := k8s.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReads waits until the stand-in supervisor has answered n reads in all.
func waitReads(t *testing.T, n int) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() error {
		if got := supervisor.readCount(); got < n {
			return fmt.Errorf("%d reads of /status, want %d", got, n)
		}
		return nil
	})
}

// eventsAbout lists the events about obj with the reason.
func eventsAbout(t *testing.T, obj client.Object, reason string) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(obj.GetNamespace())); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// setDataplane writes the dataplane's readiness as the kubelet would.
func setDataplane(t *testing.T, pod *corev1.Pod, ready bool) {
	t.Helper()
	ctx := context.Background()
	cur := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.PodIP, cur.Status.PodIPs = "127.0.0.1", []corev1.PodIP{{IP: "127.0.0.1"}}
	cur.Status.InitContainerStatuses[0].Ready = ready
	if err := k8s.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	pod.UID = cur.UID
}

// waitEvent waits for an event about obj of the type and reason whose note starts with prefix.
func waitEvent(t *testing.T, obj client.Object, kind, reason, prefix string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() error {
		list := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.UID != obj.GetUID() {
				continue
			}
			if e.Reason == reason && e.Type == kind && strings.HasPrefix(e.Note, prefix) {
				return nil
			}
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Note)
		}
		return fmt.Errorf("no %s event %s %q about %s; its events: %q", kind, reason, prefix, obj.GetName(), seen)
	})
}
