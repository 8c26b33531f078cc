package envtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

// The operator's metrics are served as controller-runtime recommends: HTTPS, and the real API
// server decides who may read them (TokenReview, then SubjectAccessReview for get /metrics).
// Nobody unauthenticated, nor a ServiceAccount without the right, reads them; a ServiceAccount
// bound to a metrics-reader ClusterRole (the chart's: get on the non-resource URL /metrics) does.
func TestMetricsNeedAnAllowedToken(t *testing.T) {
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	allowed, denied := metricsReaderToken(t, cs, "prometheus"), serviceAccountToken(t, cs, "nosy")
	if code, body := scrape(t, ""); code != http.StatusUnauthorized {
		t.Errorf("a scrape without a token got %d, want 401: %.200s", code, body)
	}
	// controller-runtime's filter answers 500 ("Authentication failed") when the TokenReview
	// says the token is invalid: refused all the same.
	if code, body := scrape(t, "not-a-token"); code == http.StatusOK || strings.Contains(body, "kubefstack_") {
		t.Errorf("a scrape with a forged token got %d: %.200s", code, body)
	}
	if code, body := scrape(t, denied); code != http.StatusForbidden {
		t.Errorf("a ServiceAccount not allowed to get /metrics got %d, want 403: %.200s", code, body)
	}
	code, body := scrape(t, allowed)
	if code != http.StatusOK || !strings.Contains(body, "kubefstack_injection_requests_total") {
		t.Fatalf("the metrics-reader ServiceAccount got %d, want 200 with kubefstack_injection_requests_total:\n%.400s", code, body)
	}
}

// metricsReaderToken is a token of a new ServiceAccount bound to a ClusterRole with the chart's
// metrics-reader rules (get on the non-resource URL /metrics), returned once the API server's
// authorizer allows it: RBAC learns of bindings through a watch, and the operator's filter
// caches a denial for 30 s.
func metricsReaderToken(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	ctx := context.Background()
	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + name},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: plainNS, Name: name}}}
	for _, o := range []client.Object{reader, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	token := serviceAccountToken(t, cs, name)
	testenv.Eventually(t, 20*time.Second, func() error {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + plainNS + ":" + name,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !got.Status.Allowed {
			return fmt.Errorf("not allowed yet: %s", got.Status.Reason)
		}
		return nil
	})
	return token
}

func serviceAccountToken(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: plainNS, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(plainNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(plainNS).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s: %v", name, err)
	}
	return tr.Status.Token
}

// scrape GETs the suite's operator's /metrics over HTTPS with the bearer token (none when empty).
func scrape(t *testing.T, token string) (int, string) {
	t.Helper()
	code, body, err := scrapeAt(metricsAddr, token)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// scrapeAt GETs https://addr/metrics. The suite's operator serves the self-signed certificate
// controller-runtime makes, so it is not verified here (certs_test.go verifies the one the
// chart's operator serves).
func scrapeAt(addr, token string) (int, string, error) {
	return scrapeWith(addr, token, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // self-signed, test only
}

func scrapeWith(addr, token string, tc *tls.Config) (int, string, error) {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s/metrics", addr), nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
