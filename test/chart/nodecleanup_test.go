package chart

import (
	"context"
	"strings"
	"testing"
	"time"

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
// pods elsewhere); once the Job reports Complete (no kubelet here: the test plays the job
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
		"team": "x", "node.kubefstack.io/vhost-user": "ready"}, Annotations: map[string]string{"node.kubefstack.io/report": "{}"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if _, err := as.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=cni"}); err != nil {
		t.Errorf("the hook may not list the CNI pods: %v", err)
	}
	if _, err := as.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the hook may not list nodes: %v", err)
	}
	patch := `{"metadata":{"labels":{"node.kubefstack.io/vhost-user":null},"annotations":{"node.kubefstack.io/report":null}}}`
	if _, err := as.CoreV1().Nodes().Patch(ctx, "node-c", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Errorf("the hook may not remove a node's labels: %v", err)
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
