package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The supervisor's /status is read through the API server's pod proxy (pods/proxy), as
// `kubectl get --raw` would: the user's credentials, no route to the pod network needed.
const (
	// statusTimeout bounds one pod's answer: the proxy's dial to a pod whose node is gone can
	// otherwise take the API server's own timeout.
	statusTimeout = 5 * time.Second
	// statusParallel pods are asked at once: enough that a namespace of pods answers in a few
	// round trips, few enough that the API server's proxy is not flooded by one command.
	statusParallel = 4
)

// podStatusReader reads one pod's /status.
type podStatusReader interface {
	readStatus(ctx context.Context, pod *corev1.Pod) (*podcontract.DataplaneStatus, error)
}

// statusError says why a pod's /status could not be read, in words a user acts on; kind groups
// the pods the same cause hides, so it is said once.
type statusError struct {
	kind string
	err  error
}

func (e *statusError) Error() string { return e.kind + ": " + e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// Kinds of statusError.
const (
	statusForbidden   = "pods/proxy forbidden"
	statusNoToken     = "the dataplane refused the pod's status token"
	statusUnreachable = "the API server could not reach the pod's port"
	statusNotServed   = "the pod serves no /status"
	statusBadAnswer   = "the pod's /status is unreadable"
	statusFailed      = "reading /status through the API server failed"
)

// proxyStatusReader asks the API server's pods/{name}:9180/proxy/status.
type proxyStatusReader struct {
	client *http.Client
	base   *url.URL
}

func newProxyStatusReader(cfg *rest.Config) (*proxyStatusReader, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath, c.GroupVersion = "/api", &schema.GroupVersion{Version: "v1"}
	base, _, err := rest.DefaultServerUrlFor(c)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return &proxyStatusReader{client: hc, base: base}, nil
}

func (p *proxyStatusReader) readStatus(ctx context.Context, pod *corev1.Pod) (*podcontract.DataplaneStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	resp, err := p.get(ctx, pod, podcontract.StatusPath)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	s, err := podcontract.ReadDataplaneStatus(resp.Body)
	if err != nil {
		return nil, &statusError{statusBadAnswer, err}
	}
	return s, nil
}

// get asks the supervisor's path of pod through the API server's pod proxy, with the pod's
// status token (the supervisor answers /status and /config to the node and to its holders; the
// proxy passes the header on, while it drops Authorization, the user's own); an answer other
// than 200 is a *statusError saying which cause.
func (p *proxyStatusReader) get(ctx context.Context, pod *corev1.Pod, path string) (*http.Response, error) {
	u := *p.base
	u.Path = strings.TrimSuffix(u.Path, "/") + fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%d/proxy%s",
		url.PathEscape(pod.Namespace), url.PathEscape(pod.Name), podcontract.SupervisorPort, path)
	u.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, &statusError{statusFailed, err}
	}
	req.Header.Set("Accept", "application/json")
	// Only a token podcontract accepts: the pod's creator wrote it.
	if token := inject.StatusToken(pod); token != "" {
		req.Header.Set(podcontract.StatusTokenHeader, token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, &statusError{statusFailed, err}
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		// The body is the API server's Status or the pod's text: a line of it, bounded.
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		detail := fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(firstLine(string(msg))))
		if resp.StatusCode == http.StatusForbidden && strings.Contains(string(msg), podcontract.StatusTokenHeader) {
			// The supervisor's refusal, not the API server's.
			return nil, &statusError{statusNoToken, detail}
		}
		switch resp.StatusCode {
		case http.StatusForbidden, http.StatusUnauthorized:
			return nil, &statusError{statusForbidden, detail}
		case http.StatusNotFound:
			return nil, &statusError{statusNotServed, detail}
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return nil, &statusError{statusUnreachable, detail}
		}
		return nil, &statusError{statusFailed, detail}
	}
	return resp, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// statusWanted: only a running pod's supervisor answers.
func statusWanted(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
}

type podKey struct{ namespace, name string }

// podStatuses are the /status answers of pods, and why the others' could not be read.
type podStatuses struct {
	got  map[podKey]*podcontract.DataplaneStatus
	errs map[podKey]error
	// unschedulable says, for a pod the scheduler could not place, which nodes lack what
	// (nodefit.Summary).
	unschedulable map[podKey]string
}

// readStatuses asks every running pod of pods for its /status, statusParallel at a time.
func readStatuses(ctx context.Context, r podStatusReader, pods []*corev1.Pod) podStatuses {
	if r == nil {
		return podStatuses{got: map[podKey]*podcontract.DataplaneStatus{}, errs: map[podKey]error{}}
	}
	got, errs := askEachPod(ctx, pods, r.readStatus)
	return podStatuses{got: got, errs: errs}
}

// askEachPod calls read for every running pod of pods, statusParallel at a time, and returns
// the answers and why the others could not be read, by pod.
func askEachPod[T any](ctx context.Context, pods []*corev1.Pod, read func(context.Context, *corev1.Pod) (*T, error)) (map[podKey]*T, map[podKey]error) {
	got, errs := map[podKey]*T{}, map[podKey]error{}
	var mu sync.Mutex
	g := &errgroup.Group{}
	g.SetLimit(statusParallel)
	for _, p := range pods {
		if !statusWanted(p) {
			continue
		}
		k := podKey{p.Namespace, p.Name}
		g.Go(func() error {
			v, err := read(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[k] = err
			} else {
				got[k] = v
			}
			return nil
		})
	}
	_ = g.Wait()
	return got, errs
}

// notes say once per cause why some pods' in-place restarts and health are not shown, with what
// to do about it.
func (s podStatuses) notes() []string {
	byKind := map[string][]podKey{}
	first := map[string]error{}
	for k, err := range s.errs {
		kind := statusFailed
		var se *statusError
		if errors.As(err, &se) {
			kind = se.kind
		}
		byKind[kind] = append(byKind[kind], k)
		if prev, ok := first[kind]; !ok || err.Error() < prev.Error() {
			first[kind] = err
		}
	}
	var out []string
	for kind, keys := range byKind {
		sort.Slice(keys, func(i, j int) bool {
			return keys[i].namespace < keys[j].namespace || keys[i].namespace == keys[j].namespace && keys[i].name < keys[j].name
		})
		what := fmt.Sprintf("pod %s/%s", keys[0].namespace, keys[0].name)
		if len(keys) > 1 {
			what = fmt.Sprintf("%d pods (%s/%s and others)", len(keys), keys[0].namespace, keys[0].name)
		}
		out = append(out, fmt.Sprintf("in-place restarts and the dataplane's health not shown for %s: %v%s", what, first[kind], statusHint(kind)))
	}
	sort.Strings(out)
	return out
}

func statusHint(kind string) string {
	switch kind {
	case statusForbidden:
		return " (the columns show the containers' restarts only; `kubectl auth can-i get pods/proxy` says whether you may read it)"
	case statusNotServed:
		return " (a dataplane image older than this plugin; the columns show the containers' restarts only)"
	case statusNoToken:
		return " (a pod injected before kube-fstack gave pods a status token, " + podcontract.EnvStatusToken + ", has none: re-create it)"
	case statusUnreachable:
		return " (a NetworkPolicy on the pod's port 9180, or the node is unreachable)"
	}
	return ""
}
