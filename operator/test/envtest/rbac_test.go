package envtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/manager"
)

// leaseName is the operator's leader-election Lease.
const leaseName = "kube-fstack-operator.kubefstack.io"

// restrictedClient is a user bound to the operator's generated RBAC alone.
type restrictedClient struct {
	client.Client
	cfg *rest.Config
}

// operatorUser creates config/rbac/role.yaml's ClusterRole and Role (in the operator's
// namespace), their resourceNames renamed by names as the chart renames them for a release, and
// a user bound to both; it returns once the API server's authorizer knows the bindings.
func operatorUser(t *testing.T, names map[string]string) *restrictedClient {
	t.Helper()
	ctx := context.Background()
	const name = "generated-rbac-operator"
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.Role // a ClusterRole's kind, name and rules read the same
		if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind == "" {
			continue
		}
		renameResources(t, role.Rules, names)
		for _, o := range roleAndBinding(t, &role, name, subject) {
			if err := k8s.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	u, err := env.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(u.Config(), client.Options{Scheme: manager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if err := c.List(ctx, &admissionregistrationv1.MutatingWebhookConfigurationList{}); err != nil {
			return err
		}
		return c.List(ctx, &corev1.SecretList{}, client.InNamespace(operatorNS),
			client.MatchingFields{"metadata.name": names["kube-fstack-webhook-cert"]})
	})
	return &restrictedClient{Client: c, cfg: u.Config()}
}

func renameResources(t *testing.T, rules []rbacv1.PolicyRule, names map[string]string) {
	t.Helper()
	for i := range rules {
		for j, n := range rules[i].ResourceNames {
			if names[n] == "" {
				t.Fatalf("config/rbac/role.yaml names %q: map it to the test's object, as the chart maps it to the release's", n)
			}
			rules[i].ResourceNames[j] = names[n]
		}
	}
}

func roleAndBinding(t *testing.T, role *rbacv1.Role, name string, subject []rbacv1.Subject) []client.Object {
	t.Helper()
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: role.Kind, Name: name}
	if role.Kind == "ClusterRole" {
		return []client.Object{
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: role.Rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subject},
		}
	}
	if role.Namespace != operatorNS {
		t.Fatalf("the generated Role is in %q, the suite's operator in %q", role.Namespace, operatorNS)
	}
	return []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: name}, Rules: role.Rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: name}, RoleRef: ref, Subjects: subject},
	}
}

// waitLeader waits until someone holds the operator's leader Lease (the suite's own operator
// runs without leader election, so the holder is the one under test).
func waitLeader(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, func() error {
		lease := &coordinationv1.Lease{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: operatorNS, Name: leaseName}, lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" || lease.Spec.RenewTime == nil {
			return fmt.Errorf("nobody holds the leader Lease: %+v", lease.Spec)
		}
		return nil
	})
}
