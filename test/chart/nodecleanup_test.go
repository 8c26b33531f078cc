package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testNodeCleanupHook runs while `helm uninstall` waits for its post-delete hook: the Job
// node-cleanup appears, its ServiceAccount may do what the cleanup does (list pods here, list
// nodes, patch a node's labels and report away) and is refused what it does not need (secrets,
// pods elsewhere, any Node change but removing node.kubefstack.io/ keys); once the Job reports Complete (no kubelet here: the test plays the job
// controller) the uninstall ends. done is the uninstall's result, for an early failure.
func testNodeCleanupHook(t *testing.T, c client.Client, admin *rest.Config, done <-chan error) {
	ctx := context.Background()
	name := release + "-node-cleanup"
	job := &batchv1.Job{}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, job)
		if err == nil {
			break
		}
		select {
		case uerr := <-done:
			t.Fatalf("helm uninstall ended (%v) without the node-cleanup hook Job", uerr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node-cleanup hook Job during helm uninstall: %v", err)
		}
	}
	args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "node-cleanup") || !strings.Contains(args, "app.kubernetes.io/component=cni") {
		t.Errorf("the hook Job runs %q, want the node-cleanup mode waiting for the CNI DaemonSet's pods", args)
	}

	hook := rest.CopyConfig(admin)
	hook.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	as, err := kubernetes.NewForConfig(hook)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c", Labels: map[string]string{
		"team": "x", "node.kubefstack.io/vhost-user": "ready"}, Annotations: map[string]string{"node.kubefstack.io/report": "{}", "owner": "ops"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if _, err := as.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=cni"}); err != nil {
		t.Errorf("the hook may not list the CNI pods: %v", err)
	}
	if _, err := as.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the hook may not list nodes: %v", err)
	}
	patchNode := func(body string) error {
		_, err := as.CoreV1().Nodes().Patch(ctx, "node-c", types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	// RBAC lets the hook patch anything of every Node; its ValidatingAdmissionPolicy (a hook
	// object made before the Job) lets it only remove node.kubefstack.io/ keys. The policy is
	// enforced once the API server has loaded it: wait for its first refusal.
	// Each try sets a new value: a patch that changes nothing passes any policy.
	for i, deadline := 0, time.Now().Add(time.Minute); time.Now().Before(deadline); i++ {
		if err = patchNode(fmt.Sprintf(`{"metadata":{"labels":{"node.kubefstack.io/vhost-user":"forged-%d"}}}`, i)); err != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "may only remove node.kubefstack.io/ labels") {
		t.Errorf("the hook set a node.kubefstack.io/ label: %v, want refused by its policy", err)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"metadata":{"labels":{"node.kubefstack.io/vhost-user":"ready","team":null}}}`, "may only remove node.kubefstack.io/ labels"},
		{`{"metadata":{"labels":{"node.kubefstack.io/vhost-user":"ready","team":"y"}}}`, "may only remove node.kubefstack.io/ labels"},
		{`{"metadata":{"labels":{"node.kubefstack.io/vhost-user":"ready","node-role.kubernetes.io/x":""}}}`, "may only remove node.kubefstack.io/ labels"},
		{`{"metadata":{"annotations":{"node.kubefstack.io/report":"{\"forged\":true}"}}}`, "may only remove node.kubefstack.io/ annotations"},
		{`{"metadata":{"annotations":{"owner":null}}}`, "may only remove node.kubefstack.io/ annotations"},
		{`{"spec":{"unschedulable":true}}`, "only remove node.kubefstack.io/ labels and annotations"},
	} {
		if err := patchNode(bad.body); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("the hook patched %s: %v, want refused with %q", bad.body, err, bad.want)
		}
	}
	patch := `{"metadata":{"labels":{"node.kubefstack.io/vhost-user":null},"annotations":{"node.kubefstack.io/report":null}}}`
	if err := patchNode(patch); err != nil {
		t.Errorf("the hook may not remove a node's labels: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "node-c"}, node); err != nil {
		t.Fatal(err)
	}
	if _, left := node.Labels["node.kubefstack.io/vhost-user"]; left || node.Labels["team"] != "x" || node.Annotations["owner"] != "ops" {
		t.Errorf("after the hook's patches node-c has labels %v, annotations %v; want only the kube-fstack keys gone", node.Labels, node.Annotations)
	}
	for _, o := range []client.Object{job, &admissionv1.ValidatingAdmissionPolicy{}} {
		key := client.ObjectKey{Namespace: namespace, Name: name}
		if _, cluster := o.(*admissionv1.ValidatingAdmissionPolicy); cluster {
			key.Namespace = ""
		}
		if err := c.Get(ctx, key, o); err != nil {
			t.Fatal(err)
		}
		if p := o.GetAnnotations()["helm.sh/hook-delete-policy"]; !strings.Contains(p, "hook-failed") || !strings.Contains(p, "hook-succeeded") {
			t.Errorf("%T %s has hook-delete-policy %q: want its objects gone whether the hook succeeds or fails", o, name, p)
		}
	}
	if _, err := as.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the hook lists secrets: %v, want forbidden", err)
	}
	if _, err := as.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the hook lists pods outside its namespace: %v, want forbidden", err)
	}

	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}}
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatalf("mark the hook Job complete: %v", err)
	}
}
