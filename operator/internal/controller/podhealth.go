package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The reasons of the Events PodHealthReconciler records on a bound pod.
const (
	// EventDataplaneNotReady: the dataplane was ready and is not; the note is the supervisor's
	// reason (a port's link down, a generation restarting).
	EventDataplaneNotReady = "DataplaneNotReady"
	// EventDataplaneReady: it is ready again, after how long.
	EventDataplaneReady = "DataplaneReady"
	// EventRestartedInPlace: the supervisor restarted the dataplane's generation, or the
	// launcher an app, inside its container, which the container's restartCount does not show.
	EventRestartedInPlace = "RestartedInPlace"
	// EventCPUsShared: at the pod's first readiness (or a return), its supervisor's placement
	// says its lcores share a CPU with the switch's PMD or the app's workers; once per pod and
	// placement.
	EventCPUsShared = "CPUsShared"
)

// Bounds on what reading the pods' /status may cost the operator: it shares its CPU with the
// webhook, and a pod answers whatever it likes (or nothing).
const (
	// podStatusTimeout bounds one read: the supervisor answers from memory in microseconds; a
	// pod that does not answer in 2 s is reported as such rather than waited for.
	podStatusTimeout = 2 * time.Second
	// podHealthWorkers read at once: transitions are faults, rare, and an OVS restart turns
	// every pod of a node unready together, which a couple of workers drain in seconds.
	podHealthWorkers = 2
	// podHealthQPS and podHealthBurst bound the reads (and the events after them) across all
	// pods: a node's worth of pods flapping, or a Deployment scaled up by hundreds (a read at
	// each pod's first readiness), cannot turn into a flood of dials and API writes.
	podHealthQPS   = 5
	podHealthBurst = 20
	// eventNoteMax is below events.k8s.io's 1 KiB limit on a note.
	eventNoteMax = 1000
	// faultWindow: with no count seen before, an in-place restart this long before the pod was
	// seen unready is taken to be that fault's (the kubelet's probes see it a period or two
	// after the supervisor acts).
	faultWindow = time.Minute
)

// PodHealthReconciler records Events on a bound pod when its dataplane goes unready after having
// been ready, when it comes back, and when the supervisor's in-place restart counts grew, with
// the reason its /status gives; and once, when the placement its /status gives says the lcores
// share CPUs (CPUsShared). It acts only on readiness transitions of pods already in the
// operator's cache: a pod's creation costs it nothing, its first readiness one bounded GET to
// the pod after the pod is Ready (off the creation's path) and no API write unless the lcores
// share a CPU (ARCHITECTURE's flat cost per pod); a fault costs one GET and an Event or two. A
// restart that never turned the pod unready is not seen here; the supervisor's metric counts
// every one.
type PodHealthReconciler struct {
	Reader client.Reader
	// Writer creates the Events. They are written one by one rather than through the
	// manager's recorder: events.k8s.io's recorder folds every event of the same pod and reason
	// within 6 minutes into a series of the first one, whose note would hide the next fault's
	// reason. The flood it guards against is bounded here instead (podEventBudget, the reads'
	// rate).
	Writer client.Writer
	// Instance names this replica in the Events (reportingInstance).
	Instance string
	// ReadStatus reads a pod's /status; nil reads http://<pod IP>:<Port>/status.
	ReadStatus func(ctx context.Context, pod *corev1.Pod) (*podcontract.DataplaneStatus, error)
	// Port is the supervisor's; 0 is podcontract.SupervisorPort (tests serve elsewhere).
	Port int
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	httpClient *http.Client
	// reads spaces the reads of /status across all pods (podHealthQPS); nil: unbounded.
	reads *rate.Limiter
	seq   atomic.Uint64
	mu    sync.Mutex
	pods  map[types.UID]*podHealth
}

// podHealth is what the reconciler remembers of a pod between its transitions.
type podHealth struct {
	// down: an unready event was recorded (or is due) and the ready one is not yet.
	down      bool
	downSince time.Time
	// reported: the unready event of this down period is recorded.
	reported bool
	// counts are the in-place restart totals last read (dataplane under "", apps by name);
	// nil until the first read.
	counts map[string]int64
	// budget bounds the events of one pod: a pod whose link flaps all day costs a few events
	// a minute, not one per flap.
	budget *rate.Limiter
	// first: the pod's first readiness is to be read (its placement), with no fault to report.
	first bool
	// readAt is the turn reserved for the next read within the reads' rate; zero: none.
	readAt time.Time
	// placementSaid names the CPUsShared event recorded for the pod, "" before any.
	placementSaid string
}

// podEventBudget: 10 events at once (a fault's unready, restart and ready, three times over),
// then one a minute.
func newPodBudget() *rate.Limiter { return rate.NewLimiter(rate.Every(time.Minute), 10) }

// podEvent is one Event to write about a pod. An event with a name is written once under
// it: a second write (another replica, or this one after a restart) finds it there.
type podEvent struct{ kind, reason, note, name string }

// SetupWithManager watches the cached pods' readiness transitions.
func (r *PodHealthReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.pods = map[types.UID]*podHealth{}
	r.httpClient = newStatusClient()
	// The queue's rate limiter paces only retries after an error: a watch event is queued
	// with no wait, so the reads are paced in Reconcile (readTurn).
	r.reads = newBucket(podHealthQPS, podHealthBurst)
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, time.Minute)
	return ctrl.NewControllerManagedBy(mgr).
		Named("dataplane-health").
		For(&corev1.Pod{}, builder.WithPredicates(r.transitions())).
		WithOptions(controller.Options{MaxConcurrentReconciles: podHealthWorkers, RateLimiter: limiter}).
		Complete(r)
}

// newStatusClient is the client of the pods' /status: straight to the pod, no proxy from the
// environment, no redirect a pod could send the operator (and the pod's token) elsewhere with,
// no connection kept (transitions are rare).
func newStatusClient() *http.Client {
	return &http.Client{
		Timeout: podStatusTimeout,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
			DialContext:           (&net.Dialer{Timeout: podStatusTimeout}).DialContext,
			ResponseHeaderTimeout: podStatusTimeout, MaxResponseHeaderBytes: 16 << 10},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// transitions lets through a pod's update that turns its dataplane unready after ready, or
// ready (the first time, for its placement, or after an unready this reconciler saw); and
// deletes, to forget the pod. Creates and every other update are dropped here, before any work.
func (r *PodHealthReconciler) transitions() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			r.mu.Lock()
			delete(r.pods, e.Object.GetUID())
			r.mu.Unlock()
			return false
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.Pod)
			cur, okNew := e.ObjectNew.(*corev1.Pod)
			if !okOld || !okNew || cur.DeletionTimestamp != nil {
				return false
			}
			was, is := dataplaneReady(old), dataplaneReady(cur)
			r.mu.Lock()
			defer r.mu.Unlock()
			h := r.pods[cur.UID]
			switch {
			case was && !is:
				if h == nil {
					h = &podHealth{budget: newPodBudget()}
					r.pods[cur.UID] = h
				}
				if !h.down {
					h.down, h.downSince = true, r.now()
				}
				return true
			case !was && is && h == nil:
				// The first readiness this replica sees (a pod that was ready before it started
				// is news too: its event's name keeps it from being said twice).
				r.pods[cur.UID] = &podHealth{first: true, budget: newPodBudget()}
				return true
			case !was && is:
				return h.down || h.first
			}
			return false
		},
	}
}

func (r *PodHealthReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile records what changed for one pod since its last transition.
func (r *PodHealthReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Reader.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.mu.Lock()
	h := r.pods[pod.UID]
	r.mu.Unlock()
	if h == nil || pod.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if wait := r.readTurn(h); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	ready := dataplaneReady(pod)
	st, readErr := r.read(ctx, pod)
	if readErr != nil {
		log.FromContext(ctx).V(1).Info("read the dataplane's status", "pod", req.NamespacedName, "error", readErr)
	}
	evs := r.decide(pod.UID, h, ready, st, readErr)
	for _, e := range evs {
		if err := r.write(ctx, pod, e); err != nil {
			// An event is worth a retry of the write alone; the decision is made and remembered.
			log.FromContext(ctx).Error(err, "record event", "pod", req.NamespacedName, "reason", e.reason)
		}
	}
	return ctrl.Result{}, nil
}

// decide updates what is remembered of the pod and returns the events to write, within its
// budget.
func (r *PodHealthReconciler) decide(uid types.UID, h *podHealth, ready bool, st *podcontract.DataplaneStatus, readErr error) []podEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h != r.pods[uid] {
		return nil // deleted meanwhile
	}
	first := h.first
	h.first = false
	var evs []podEvent
	switch {
	case !ready && h.down && !h.reported:
		h.reported = true
		reason := "the dataplane's readiness probe fails"
		if st != nil {
			reason = st.Reason
			if down := downPorts(st); down != "" && !strings.Contains(reason, "link down") {
				reason += "; " + down
			}
		} else if readErr != nil {
			reason += fmt.Sprintf("; its /status could not be read: %v", readErr)
		}
		evs = append(evs, podEvent{kind: corev1.EventTypeWarning, reason: EventDataplaneNotReady, note: "dataplane not ready: " + reason})
	case ready && h.down:
		h.down, h.reported = false, false
		evs = append(evs, podEvent{kind: corev1.EventTypeNormal, reason: EventDataplaneReady,
			note: fmt.Sprintf("dataplane ready again after %s", r.now().Sub(h.downSince).Round(time.Second))})
	}
	// At the first readiness the counts so far are the start's, not a fault's: they are only
	// what the next fault's are counted from.
	if e := restartEvent(h, st); e != nil && (!first || h.down) {
		evs = append([]podEvent{*e}, evs...)
	}
	if ready {
		if e := placementEvent(uid, h, st); e != nil {
			evs = append(evs, *e)
		}
	}
	if first && !h.down && h.placementSaid == "" {
		// Well placed (or silent) at its first readiness: nothing to remember until a fault.
		delete(r.pods, uid)
	}
	kept := evs[:0]
	for _, e := range evs {
		if h.budget == nil || h.budget.AllowN(r.now(), 1) {
			kept = append(kept, e)
		}
	}
	return kept
}

// write creates one events.k8s.io Event about pod.
func (r *PodHealthReconciler) write(ctx context.Context, pod *corev1.Pod, e podEvent) error {
	return writePodEvent(ctx, r.Writer, r.Instance, r.now(), r.seq.Add(1), pod, e)
}

// writePodEvent creates one events.k8s.io Event about pod; seq tells apart two events written
// in the same nanosecond.
func writePodEvent(ctx context.Context, w client.Writer, instance string, now time.Time, seq uint64, pod *corev1.Pod, e podEvent) error {
	if w == nil {
		return nil
	}
	// Named as the recorder names them, the pod's name and the time, with a sequence for two
	// events of one reconcile; or the pod's name and the event's own.
	name := fmt.Sprintf("%s.%x.%d", pod.Name[:min(len(pod.Name), 200)], now.UnixNano(), seq)
	if e.name != "" {
		name = pod.Name[:min(len(pod.Name), 200)] + "." + e.name
	}
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name},
		EventTime:  metav1.NewMicroTime(now), ReportingController: reportingController, ReportingInstance: instance,
		Action: "Observe", Reason: e.reason, Type: e.kind, Note: note(e.note),
		Regarding: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion},
	}
	if ev.ReportingInstance == "" {
		ev.ReportingInstance = reportingController
	}
	err := w.Create(ctx, ev)
	if e.name != "" && apierrors.IsAlreadyExists(err) {
		return nil // said already, by this replica before a restart or by another
	}
	return err
}

// reportingController is the operator's name in its Events, as its recorder's.
const reportingController = "kube-fstack"

// restartEvent is one event for the in-place counts that grew since the last read, or nil.
// With no count read before, a restart is new when it came within faultWindow of the
// unreadiness (this fault's); older ones are history the operator did not see happen.
func restartEvent(h *podHealth, st *podcontract.DataplaneStatus) *podEvent {
	if st == nil {
		return nil
	}
	counts := map[string]int64{"": int64(st.Restarts.Dataplane.Total)}
	all := map[string]podcontract.RestartCount{"": st.Restarts.Dataplane}
	for name, c := range st.Restarts.Apps {
		counts[name], all[name] = int64(c.Total), c
	}
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	var parts []string
	for _, name := range names {
		c := all[name]
		var grew int64
		switch prev, seen := h.counts[name]; {
		case h.counts != nil && seen:
			grew = int64(c.Total) - prev
		case h.counts != nil:
			grew = int64(c.Total)
		case c.Last != nil && !c.Last.Time.Before(h.downSince.Add(-faultWindow)):
			grew = 1
		}
		if grew <= 0 || c.Total <= 0 {
			continue
		}
		what := "the dataplane (a new F-Stack generation)"
		if name != "" {
			what = "app " + name
		}
		msg := fmt.Sprintf("%s restarted in place: %d since last seen, %d in all", what, grew, c.Total)
		if c.Last != nil {
			msg += fmt.Sprintf("; last at %s: %s: %s", c.Last.Time.UTC().Format(time.RFC3339), c.Last.Reason, c.Last.Message)
		}
		parts = append(parts, msg)
	}
	h.counts = counts
	if len(parts) == 0 {
		return nil
	}
	return &podEvent{kind: corev1.EventTypeWarning, reason: EventRestartedInPlace, note: strings.Join(parts, " | ")}
}

// read asks the pod's supervisor for its /status.
func (r *PodHealthReconciler) read(ctx context.Context, pod *corev1.Pod) (*podcontract.DataplaneStatus, error) {
	if r.ReadStatus != nil {
		return r.ReadStatus(ctx, pod)
	}
	ip := net.ParseIP(pod.Status.PodIP)
	if ip == nil {
		return nil, errors.New("the pod has no IP")
	}
	port := r.Port
	if port == 0 {
		port = podcontract.SupervisorPort
	}
	ctx, cancel := context.WithTimeout(ctx, podStatusTimeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(port)) + podcontract.StatusPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// The supervisor answers the node and the holders of the pod's token, which the cache kept
	// only when it is one podcontract accepts (a pod's spec is its creator's to write).
	token := inject.StatusToken(pod)
	if token != "" {
		req.Header.Set(podcontract.StatusTokenHeader, token)
	}
	resp, err := r.httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d%s", url, resp.StatusCode, statusRefusal(resp.StatusCode, token))
	}
	return podcontract.ReadDataplaneStatus(resp.Body)
}

// statusRefusal says what an answer other than 200 to /status means.
func statusRefusal(code int, token string) string {
	switch {
	case code == http.StatusNotFound:
		return " (a dataplane image without " + podcontract.StatusPath + " answers 404)"
	case code == http.StatusForbidden && token == "":
		return " (the pod has no status token, " + podcontract.EnvStatusToken + ": injected before kube-fstack gave pods one; re-create it)"
	case code == http.StatusForbidden:
		return " (the dataplane refused the pod's status token)"
	}
	return ""
}

func downPorts(st *podcontract.DataplaneStatus) string {
	var s []string
	for _, p := range st.DownPorts() {
		s = append(s, fmt.Sprintf("port %d (attachment %s) link down", p.Port, p.Attachment))
	}
	return strings.Join(s, ", ")
}

// note makes text from a pod fit an Event's note: printable (kubectl describe prints it raw, and
// the pod wrote it), and within the API's limit.
func note(s string) string {
	out := podcontract.Printable(s)
	if len(out) > eventNoteMax {
		cut := eventNoteMax - 3
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "..."
	}
	return out
}

func newBucket(qps float64, burst int) *rate.Limiter { return rate.NewLimiter(rate.Limit(qps), burst) }
