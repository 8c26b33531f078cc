package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// supervisorStatus is a /status as the supervisor writes it (the contract's example): a pod
// whose port went down after OVS restarted, two dataplane generations and one app restarted in
// place.
func supervisorStatus() *podcontract.DataplaneStatus {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	down := at.Add(-12 * time.Second)
	return &podcontract.DataplaneStatus{Generation: 3, Ready: false,
		Reason: "port 0 (attachment net1): link down for 12s: the vhost-user peer (OVS) went away; reconnecting",
		Restarts: podcontract.InPlaceRestarts{
			Dataplane: podcontract.RestartCount{Total: 2,
				Last: &podcontract.RestartRecord{Reason: "process_exit", Message: "F-Stack process 0 (primary) exited: signal: killed", Time: at}},
			Apps: map[string]podcontract.RestartCount{"nginx": {Total: 1,
				Last: &podcontract.RestartRecord{Reason: "exited", Message: "nginx exited with status 1", Time: at}}}},
		Ports: []podcontract.PortStatus{{Port: 0, Attachment: "net1", DownSince: &down}}}
}

// fakeAPIServer stands in for kube-apiserver's pod proxy: it answers
// /api/v1/namespaces/{ns}/pods/{name}:9180/proxy/status with answer(name), and counts calls.
func fakeAPIServer(t *testing.T, answer func(name string, w http.ResponseWriter)) (*rest.Config, *atomic.Int32) {
	t.Helper()
	calls := &atomic.Int32{}
	re := regexp.MustCompile(`^/api/v1/namespaces/web/pods/([a-z0-9-]+):9180/proxy/status$`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := re.FindStringSubmatch(r.URL.Path)
		if m == nil || r.Method != http.MethodGet {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer user-token" {
			t.Errorf("the user's credentials were not sent: %q", r.Header.Get("Authorization"))
		}
		calls.Add(1)
		answer(m[1], w)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, BearerToken: "user-token"}, calls
}

func apiStatus(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Message: msg, Code: int32(code)})
}

// The reader asks the API server's pod proxy for each running pod's /status and classifies
// what goes wrong, so the cause is said in words a user acts on.
func TestProxyStatusReader(t *testing.T) {
	cfg, _ := fakeAPIServer(t, func(name string, w http.ResponseWriter) {
		switch name {
		case "serving":
			_ = json.NewEncoder(w).Encode(supervisorStatus())
		case "forbidden":
			apiStatus(w, http.StatusForbidden, `pods "forbidden" is forbidden: User "u" cannot get resource "pods/proxy" in API group "" in the namespace "web"`)
		case "old-image":
			http.Error(w, "404 page not found", http.StatusNotFound)
		case "unreachable":
			apiStatus(w, http.StatusServiceUnavailable, "error trying to reach service: dial tcp 10.0.0.9:9180: connect: connection refused")
		case "huge":
			_, _ = w.Write([]byte(`{"reason":"` + strings.Repeat("x", podcontract.MaxStatusBytes) + `"}`))
		case "no-token":
			http.Error(w, podcontract.StatusPath+" is "+podcontract.StatusTokenRefusal, http.StatusForbidden)
		}
	})
	r, err := newProxyStatusReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.readStatus(context.Background(), runningPod("serving", ""))
	if err != nil || s.Restarts.Dataplane.Total != 2 || s.Reason != supervisorStatus().Reason {
		t.Fatalf("serving: %+v, %v", s, err)
	}
	for name, kind := range map[string]string{"forbidden": statusForbidden, "old-image": statusNotServed,
		"unreachable": statusUnreachable, "huge": statusBadAnswer, "no-token": statusNoToken} {
		_, err := r.readStatus(context.Background(), runningPod(name, ""))
		var se *statusError
		if !errors.As(err, &se) || se.kind != kind {
			t.Errorf("%s: %v; want kind %q", name, err, kind)
		}
	}
}

// Only a running pod's supervisor can answer: pending, terminating and address-less pods are not
// asked (each would cost the API server a proxy dial that fails).
func TestReadStatusesOnlyRunningPods(t *testing.T) {
	cfg, calls := fakeAPIServer(t, func(_ string, w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(supervisorStatus()) })
	r, err := newProxyStatusReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	var pods []*corev1.Pod
	for i := range 9 {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: fmt.Sprintf("p%d", i)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}})
	}
	pods[0].Status.Phase = corev1.PodPending
	pods[1].DeletionTimestamp = &now
	pods[2].Status.PodIP = ""
	st := readStatuses(context.Background(), r, pods)
	if len(st.got) != 6 || len(st.errs) != 0 || calls.Load() != 6 {
		t.Errorf("got %d, errors %v, %d calls; want the 6 running pods", len(st.got), st.errs, calls.Load())
	}
}

// The columns add the supervisor's in-place restarts to the containers' and say why a running
// pod is not ready; -o json carries the same as fields.
func TestStatusShowsInPlaceRestartsAndReason(t *testing.T) {
	si := &fsv1.StackInstance{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "web"}}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
		InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, RestartCount: 1,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "nginx", RestartCount: 2}, {Name: "sidecar", RestartCount: 1}}}}
	ready := *pod.DeepCopy()
	ready.Name = "ready"
	ready.Status.InitContainerStatuses[0].Ready = true
	upAgain := supervisorStatus()
	upAgain.Ready, upAgain.Reason, upAgain.Ports = true, "ready", nil
	forbidden := &statusError{statusForbidden, errors.New("HTTP 403: forbidden")}
	st := podStatuses{got: map[podKey]*podcontract.DataplaneStatus{{"web", "p"}: supervisorStatus(), {"web", "ready"}: upAgain},
		errs: map[podKey]error{{"web", "unread"}: forbidden}}
	unread := *pod.DeepCopy()
	unread.Name = "unread"
	l := newStackStatusList()
	l.addStack(si, []corev1.Pod{pod, ready, unread}, st)
	var out bytes.Buffer
	if err := l.writeTable(&out, statusTable{}); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`STACK +READY +POD +NODE +ADDRESSES +CONFIG-HASH +CONFIG +DATAPLANE +RESTARTS +APP-RESTARTS\n`,
		`\ns +0/0 +p +- +- +- +unknown \(not injected\) +Running, not ready: port 0 \(attachment net1\): link down for 12s: the vhost-user peer \(OVS\) went away; reconnecting +3 \(2 in place\) +4 \(1 in place\)\n`,
		`\ns +0/0 +ready +- +- +- +unknown \(not injected\) +Running, ready +3 \(2 in place\) +4 \(1 in place\)\n`,
		// What cannot be read falls back to the containers' counts.
		`\ns +0/0 +unread +- +- +- +unknown \(not injected\) +Running, not ready +1 +3\n`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("table does not match %q:\n%s", re, out.String())
		}
	}
	if n := st.notes(); len(n) != 1 || !strings.Contains(n[0], "pod web/unread: pods/proxy forbidden: HTTP 403") ||
		!strings.Contains(n[0], "kubectl auth can-i get pods/proxy") {
		t.Errorf("notes %q", n)
	}
	var js bytes.Buffer
	if err := (&outputFlags{print: newPrintFlagsFor("json")}).printObject(l, &js); err != nil {
		t.Fatal(err)
	}
	var got StackStatusList
	if err := yaml.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	p := got.Items[0].Pods[0]
	if d := p.Dataplane; d.InPlaceRestarts == nil || *d.InPlaceRestarts != 2 || d.Restarts != 1 || d.Generation != 3 ||
		d.LastRestart == nil || d.LastRestart.Reason != "process_exit" || len(d.Ports) != 1 || d.Ports[0].LinkUp || !strings.HasPrefix(d.Health, "port 0") {
		t.Errorf("-o json dataplane %+v", d)
	}
	if len(p.Apps) != 2 || p.Apps[0].Name != "nginx" || p.Apps[0].Restarts != 2 || p.Apps[0].InPlaceRestarts == nil || *p.Apps[0].InPlaceRestarts != 1 ||
		p.Apps[1].Name != "sidecar" || p.Apps[1].InPlaceRestarts != nil {
		t.Errorf("-o json apps %+v", p.Apps)
	}
	if u := got.Items[0].Pods[2]; u.Name != "unread" || !strings.Contains(u.StatusError, "pods/proxy forbidden") || u.Dataplane.InPlaceRestarts != nil {
		t.Errorf("-o json unread pod %+v", u)
	}
}

// runningPod is a running pod of namespace web whose dataplane container carries token (none
// when empty).
func runningPod(name, token string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name},
		Spec:   corev1.PodSpec{InitContainers: []corev1.Container{{Name: podcontract.DataplaneContainer}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}}
	if token != "" {
		p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: podcontract.EnvStatusToken, Value: token}}
	}
	return p
}

// The supervisor answers /status and /config to the node and to the pod's status token: the
// reader sends the token of each pod's dataplane container through the pod proxy, a valid one
// only (the pod's creator wrote it), and says so when the dataplane refused.
func TestProxyReaderSendsThePodsStatusToken(t *testing.T) {
	token := strings.Repeat("0123456789abcdef", 4)
	var sent sync.Map
	cfg, _ := fakeAPIServer(t, func(name string, w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(supervisorStatus()) })
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Store(strings.TrimSuffix(r.URL.Path[strings.LastIndex(r.URL.Path, "pods/")+5:], ":9180/proxy/status"), r.Header.Get(podcontract.StatusTokenHeader))
			return rt.RoundTrip(r)
		})
	}
	r, err := newProxyStatusReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := readStatuses(context.Background(), r, []*corev1.Pod{runningPod("a", token), runningPod("b", ""),
		runningPod("c", token+"\r\nX-Other: 1"), runningPod("d", strings.Repeat("a", podcontract.MaxStatusTokenLen+1))})
	if len(st.got) != 4 {
		t.Fatalf("read %d pods, errors %v", len(st.got), st.errs)
	}
	for name, want := range map[string]string{"a": token, "b": "", "c": "", "d": ""} {
		if got, _ := sent.Load(name); got != want {
			t.Errorf("pod %s: sent token %q, want %q", name, got, want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
