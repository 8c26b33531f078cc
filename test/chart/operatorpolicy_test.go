package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRefusesSharedNamespaces: the release's namespace holds the operator's Secret and Lease
// privileges; kube-system and default are refused with the reason and what to do.
func TestRefusesSharedNamespaces(t *testing.T) {
	for _, ns := range []string{"kube-system", "default"} {
		_, stderr, err := helm(t, "template", release, chartDir, "--namespace", ns, "--kube-version", kubeVersion)
		if err == nil || !strings.Contains(stderr, `must not be installed into the "`+ns+`" namespace`) ||
			!strings.Contains(stderr, "a namespace of its own") {
			t.Errorf("helm template -n %s: %v\n%s; want refused, naming the namespace and what to do", ns, err, stderr)
		}
	}
}

// testOperatorConfigMapPolicy: with the installed chart, the operator's ServiceAccount (RBAC:
// create and patch ConfigMaps in every namespace) may write a ConfigMap shaped as its own,
// <stack>-fstack controlled by that StackInstance, and nothing else: not another name, not one
// without its label or controller, not a user's ConfigMap of that name.
func testOperatorConfigMapPolicy(t *testing.T, c client.Client, admin *rest.Config) {
	ctx := context.Background()
	const ns = "tenant-cm"
	as := asOperator(t, c, admin, ns)
	yes := true
	owner := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "kubefstack.io/v1alpha1", Kind: "StackInstance", Name: name, UID: "0c6c1f4e-1",
			Controller: &yes, BlockOwnerDeletion: &yes}}
	}
	cm := func(name, stack string, owners []metav1.OwnerReference) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "kube-fstack", "kubefstack.io/stack": stack}},
			Data: map[string]string{"config.ini": "x"}}
	}
	create := func(o *corev1.ConfigMap) error {
		_, err := as.CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// The policy is enforced once the API server has loaded it: wait for its first refusal.
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = create(cm("app-config", "web", owner("web"))); err != nil {
			break
		}
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "named <stack>-fstack") {
		t.Fatalf("the operator created ConfigMap app-config: %v, want refused by its policy", err)
	}
	noLabel := cm("web-fstack", "web", owner("web"))
	delete(noLabel.Labels, "app.kubernetes.io/managed-by")
	for _, bad := range []struct {
		cm   *corev1.ConfigMap
		want string
	}{
		{cm("web-fstack", "", owner("web")), "named <stack>-fstack"},
		{cm("web-fstack", "other", owner("other")), "named <stack>-fstack"},
		{noLabel, "managed-by=kube-fstack"},
		{cm("web-fstack", "web", nil), "whose controller is the StackInstance"},
		{cm("web-fstack", "web", owner("other")), "whose controller is the StackInstance"},
	} {
		if err := create(bad.cm); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("the operator created %s labelled %v owned by %v: %v, want refused with %q", bad.cm.Name, bad.cm.Labels,
				bad.cm.OwnerReferences, err, bad.want)
		}
	}
	if err := create(cm("web-fstack", "web", owner("web"))); err != nil {
		t.Errorf("the operator may not create its own ConfigMap: %v", err)
	}
	// A user's ConfigMap of that name: the operator cannot take it over (a patch that would add
	// its label and controller).
	user := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db-fstack", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	takeover := `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"kube-fstack","kubefstack.io/stack":"db"},` +
		`"ownerReferences":[{"apiVersion":"kubefstack.io/v1alpha1","kind":"StackInstance","name":"db","uid":"0c6c1f4e-2","controller":true}]}}`
	_, err = as.CoreV1().ConfigMaps(ns).Patch(ctx, "db-fstack", types.MergePatchType, []byte(takeover), metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "whose controller is the StackInstance") {
		t.Errorf("the operator took over a user's ConfigMap: %v, want refused", err)
	}
}

// asOperator makes the namespace ns and a client that is the operator's ServiceAccount (as the
// chart installs it), for the tests of what the chart's policies let it write.
func asOperator(t *testing.T, c client.Client, admin *rest.Config, ns string) *kubernetes.Clientset {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	op := rest.CopyConfig(admin)
	op.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + release + "-operator",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	as, err := kubernetes.NewForConfig(op)
	if err != nil {
		t.Fatal(err)
	}
	return as
}
