package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testNodeAgentPolicy: with the installed chart, the node agent's ServiceAccount, holding the
// token kubelet would give its pod on node-a (bound to the pod, so it carries the node claim),
// may patch node-a's node.kubefstack.io/ labels and report annotation, and nothing else: not
// node-b, not another label or annotation, not the spec. The ValidatingAdmissionPolicy does that;
// RBAC alone would allow every one of these patches.
func testNodeAgentPolicy(t *testing.T, c client.Client, admin *rest.Config) {
	ctx := context.Background()
	for _, name := range []string{"node-a", "node-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "x"},
			Annotations: map[string]string{"owner": "ops"}}}
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	agent := agentClient(t, c, admin, "node-a")
	patch := func(node, body string) error {
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	ownLabel := `{"metadata":{"labels":{"node.kubefstack.io/vhost-user":"ready"}}}`
	// The policy is enforced once the API server has loaded it: wait for its first refusal.
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = patch("node-b", ownLabel); err != nil {
			break
		}
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "only its own Node") {
		t.Fatalf("patching another node's label: %v, want refused by the policy", err)
	}
	for _, ok := range []string{ownLabel,
		`{"metadata":{"labels":{"node.kubefstack.io/vhost-user":null,"node.kubefstack.io/cpu-manager":"static"}}}`,
		`{"metadata":{"annotations":{"node.kubefstack.io/report":"{}"}}}`} {
		if err := patch("node-a", ok); err != nil {
			t.Errorf("own node, own keys %s: %v", ok, err)
		}
	}
	for _, bad := range []struct{ body, want string }{
		{`{"metadata":{"labels":{"team":"y"}}}`, "only node.kubefstack.io/ labels"},
		{`{"metadata":{"labels":{"team":null}}}`, "only node.kubefstack.io/ labels"},
		{`{"metadata":{"labels":{"kubefstack.io/stack":"x"}}}`, "only node.kubefstack.io/ labels"},
		{`{"metadata":{"annotations":{"owner":"me"}}}`, "only the node.kubefstack.io/report annotation"},
		{`{"spec":{"unschedulable":true}}`, "only node.kubefstack.io/ labels and the report annotation"},
	} {
		if err := patch("node-a", bad.body); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("own node, %s: %v, want refused with %q", bad.body, err, bad.want)
		}
	}
}

// agentClient is the node agent's ServiceAccount with a token bound to a pod on node.
func agentClient(t *testing.T, c client.Client, admin *rest.Config, node string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	sa := release + "-node-agent"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent-test", Namespace: namespace},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "agent", Image: "localhost/kube-fstack/cni:dev"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s bound to a pod on %s: %v", sa, node, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	agent, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return agent
}
