package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

// injectWebhook is the injection webhook's name (config/webhook), the one thing of ours the API
// server's refusal names.
const injectWebhook = "inject.kubefstack.io"

// checkOperatorDown stops the operator and shows what its webhook's scope promises: a pod that
// needs F-Stack is refused (failurePolicy Fail) with the API server naming the webhook, while a
// pod in a namespace that did not opt in starts as if kube-fstack were not installed. Then the
// operator comes back and injects again.
func checkOperatorDown(t *testing.T) {
	ctx := context.Background()
	deploy := operatorDeployment(t)
	replicas := strconv.Itoa(int(*deploy.Spec.Replicas))
	t.Cleanup(func() { // a failure half-way must not leave the cluster without its operator
		if t.Failed() {
			_, _ = env.Kubectl("scale", "-n", env.Namespace, "deployment/"+deploy.Name, "--replicas="+replicas)
		}
	})
	if out, err := env.Kubectl("scale", "-n", env.Namespace, "deployment/"+deploy.Name, "--replicas=0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	err := framework.Poll("the operator's pods gone", 2*time.Minute, time.Second, func() (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(env.Namespace), client.MatchingLabels(deploy.Spec.Selector.MatchLabels)); err != nil {
			return false, err.Error(), nil
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The API server learns that the Service has no endpoints through a watch: wait until a
	// server-side dry run (which calls the webhook too, and stores nothing) is refused.
	probe := boundPod("operator-down-probe")
	err = framework.Poll("the API server refuses pods naming a stack", 60*time.Second, time.Second, func() (bool, string, error) {
		err := env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err != nil, fmt.Sprintf("dry run: %v", err), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	out, err := env.KubectlIn([]byte(podYAML(boundPod("operator-down"))), "create", "-f", "-")
	if err == nil {
		t.Fatalf("a pod naming StackInstance %s was created with the operator down:\n%s", stackName, out)
	}
	for _, want := range []string{"failed calling webhook", injectWebhook, webhookService(t)} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	t.Logf("with the operator down, kubectl create says: %s", strings.TrimSpace(out))
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: injectedNS, Name: "operator-down"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused pod was stored (get: %v)", err)
	}

	plain := startPlainPod(t, "operator-down-plain")
	t.Logf("a pod naming the stack outside opted-in namespaces started: %s", framework.PodSummary(plain))

	if out, err := env.Kubectl("scale", "-n", env.Namespace, "deployment/"+deploy.Name, "--replicas="+replicas); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := env.Kubectl("rollout", "status", "-n", env.Namespace, "deployment/"+deploy.Name, "--timeout=180s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Injected again (a dry run: the node's one exclusive CPU is the running app's; the next step
	// schedules a real replacement pod).
	err = framework.Poll("a pod naming the stack injected again", 60*time.Second, time.Second, func() (bool, string, error) {
		p := probe.DeepCopy()
		if err := env.Client.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err.Error(), nil
		}
		return container(p, podcontract.DataplaneContainer) != nil, framework.PodSummary(p), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkMetrics scrapes the operator's metrics through the chart's Service as Prometheus would:
// refused without a token, served to a ServiceAccount bound to the chart's metrics-reader.
func checkMetrics(t *testing.T) {
	ctx := context.Background()
	url, reader := metricsEndpoint(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: plainNS, Name: "e2e-prometheus"}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: plainNS, Name: sa.Name}}}
	for _, o := range []client.Object{sa, binding} {
		if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	tr, err := env.Clientset.CoreV1().ServiceAccounts(plainNS).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code := curl(t, url, ""); code != "401" {
		t.Fatalf("an anonymous scrape of %s got HTTP %s, want 401", url, code)
	}
	// The binding reaches the API server's authorizer through a watch, and the operator caches a
	// denial for 30 s: poll.
	err = framework.Poll("the metrics-reader's scrape answered", 90*time.Second, 2*time.Second, func() (bool, string, error) {
		code := curl(t, url, tr.Status.Token)
		return code == "200", "HTTP " + code, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := nodeCurl(url, tr.Status.Token, "-s")
	if err != nil || !strings.Contains(body, "kubefstack_injection_requests_total") {
		t.Fatalf("the scrape has no kubefstack_injection_requests_total (%v):\n%.400s", err, body)
	}
}

// curl returns the HTTP status of a GET from the node (where Prometheus's traffic would come
// from a pod; the node reaches Service IPs the same way). The certificate is the operator's
// self-signed one.
func curl(t *testing.T, url, token string) string {
	t.Helper()
	out, err := nodeCurl(url, token, "-s", "-o", "/dev/null", "-w", "%{http_code}")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func nodeCurl(url, token string, args ...string) (string, error) {
	args = append([]string{"curl", "-k", "--max-time", "10"}, args...)
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	cmd := slices.Concat(env.NodeExec, args, []string{url})
	return nodetest.Run(cmd[0], cmd[1:]...)
}

func releaseLabels() client.MatchingLabels {
	return client.MatchingLabels{"app.kubernetes.io/instance": env.Release}
}

// webhookService is the Service the injection webhook's configuration calls.
func webhookService(t *testing.T) string {
	t.Helper()
	list := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := env.Client.List(context.Background(), list, releaseLabels()); err != nil || len(list.Items) != 1 {
		t.Fatalf("want the release's one MutatingWebhookConfiguration, got %d (%v)", len(list.Items), err)
	}
	return list.Items[0].Webhooks[0].ClientConfig.Service.Name
}

// metricsEndpoint is the URL of the chart's metrics Service and the name of its reader role.
func metricsEndpoint(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	svcs := &corev1.ServiceList{}
	if err := env.Client.List(ctx, svcs, client.InNamespace(env.Namespace), releaseLabels()); err != nil {
		t.Fatal(err)
	}
	url := ""
	for _, s := range svcs.Items {
		for _, p := range s.Spec.Ports {
			if p.Name == "https-metrics" {
				url = fmt.Sprintf("https://%s:%d/metrics", s.Spec.ClusterIP, p.Port)
			}
		}
	}
	roles := &rbacv1.ClusterRoleList{}
	if err := env.Client.List(ctx, roles, releaseLabels()); err != nil {
		t.Fatal(err)
	}
	reader := ""
	for _, r := range roles.Items {
		if strings.HasSuffix(r.Name, "-metrics-reader") {
			reader = r.Name
		}
	}
	if url == "" || reader == "" {
		t.Fatalf("the chart installed no metrics Service (port https-metrics) or no metrics-reader ClusterRole: %q %q", url, reader)
	}
	return url, reader
}

func operatorDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	deps, err := env.Clientset.AppsV1().Deployments(env.Namespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator,app.kubernetes.io/instance=" + env.Release})
	if err != nil || len(deps.Items) != 1 {
		t.Fatalf("want one operator Deployment in %s, got %v (%v)", env.Namespace, deps, err)
	}
	return &deps.Items[0]
}

// boundPod is a pod in the opted-in namespace that names the StackInstance.
func boundPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: injectedNS, Name: name, Labels: map[string]string{"kubefstack.io/stack": stackName}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: appCont, Image: "localhost/nginx:1.22",
			ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"nginx", "-g", "daemon off;"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
	}
}

func podYAML(p *corev1.Pod) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s, labels: {kubefstack.io/stack: %s}}\n"+
		"spec:\n  containers:\n  - {name: %s, image: %s, command: [nginx, -g, 'daemon off;']}\n",
		p.Name, p.Namespace, stackName, p.Spec.Containers[0].Name, p.Spec.Containers[0].Image)
}

// startPlainPod creates a pod naming the stack in the namespace that did not opt in, waits for
// it to run and deletes it.
func startPlainPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p := boundPod(name)
	p.Namespace = plainNS
	p.Spec.TerminationGracePeriodSeconds = new(int64(1))
	p.Spec.Containers[0].Command = nil
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")}}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatalf("a pod outside opted-in namespaces was refused with the operator down: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p) })
	got := &corev1.Pod{}
	err := framework.Poll("pod "+name+" Running", 2*time.Minute, time.Second, func() (bool, string, error) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
			return false, err.Error(), nil
		}
		return got.Status.Phase == corev1.PodRunning, framework.PodSummary(got), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.InitContainers) != 0 || got.Annotations["kubefstack.io/status"] != "" {
		t.Fatalf("the pod outside opted-in namespaces was changed: %s", framework.PodSummary(got))
	}
	return got
}

// checkWebhookNeedsClientCert posts a review to the webhook Service from the node without a
// client certificate, as any pod could: the operator requires the API server's (the chart's
// webhook.clientCA, which hack/cluster sets), so the handshake is refused and no review is
// answered, while the API server's own calls inject pods throughout the suite.
func checkWebhookNeedsClientCert(t *testing.T) {
	svc := &corev1.Service{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: env.Namespace, Name: webhookService(t)}, svc); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://%s:443/inject-v1-pod", svc.Spec.ClusterIP)
	out, err := nodeCurl(url, "", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
		"-H", "Content-Type: application/json", "-d", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)
	if err == nil || strings.TrimSpace(out) != "000" {
		t.Fatalf("a review posted to %s without a client certificate got HTTP %s (%v); want the TLS handshake refused", url, out, err)
	}
	t.Logf("refused without a client certificate: %v", err)
}
