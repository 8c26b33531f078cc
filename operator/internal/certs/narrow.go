package certs

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// cert-controller builds its own cache from the manager's rest config, with no way to give its
// Secret informer a field selector: it would list and watch every Secret of the operator's
// namespace (others' tokens and credentials included) to read one. The rotator is handed a
// manager whose rest config adds fieldSelector=metadata.name=<the certificate's Secret> to
// every list and watch of that namespace's Secrets that names no selector of its own, so it
// holds that one Secret only, and RBAC can then grant list and watch by that name alone.
type narrowedManager struct {
	ctrl.Manager
	cfg *rest.Config
}

func (m narrowedManager) GetConfig() *rest.Config { return m.cfg }

// withSecretByName is mgr with its rest config narrowed to the Secret namespace/name.
func withSecretByName(mgr ctrl.Manager, namespace, name string) ctrl.Manager {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &secretByName{next: rt, collection: "/api/v1/namespaces/" + namespace + "/secrets", selector: "metadata.name=" + name}
	})
	return narrowedManager{Manager: mgr, cfg: cfg}
}

type secretByName struct {
	next       http.RoundTripper
	collection string
	selector   string
}

func (s *secretByName) RoundTrip(req *http.Request) (*http.Response, error) {
	// A server URL may carry a path prefix: the collection is the path's end.
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, s.collection) {
		return s.next.RoundTrip(req)
	}
	q := req.URL.Query()
	if q.Get("fieldSelector") != "" {
		return s.next.RoundTrip(req)
	}
	q.Set("fieldSelector", s.selector)
	r := req.Clone(req.Context())
	u := *req.URL
	u.RawQuery = q.Encode()
	r.URL = &url.URL{}
	*r.URL = u
	return s.next.RoundTrip(r)
}
