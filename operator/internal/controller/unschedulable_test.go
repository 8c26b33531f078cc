package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Only the scheduler's verdict that no node fits starts an explanation, and the cache keeps that
// condition without the scheduler's ever-changing message.
func TestTrimPodKeepsUnschedulable(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}}}
	out, _ := TrimPod(p)
	tp := out.(*corev1.Pod)
	if !podUnschedulable(tp) || tp.Status.Conditions[0].Message != "" {
		t.Fatalf("trimmed %+v", tp.Status.Conditions)
	}
	p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated
	if out, _ := TrimPod(p); podUnschedulable(out.(*corev1.Pod)) || len(out.(*corev1.Pod).Status.Conditions) != 0 {
		t.Fatal("a gated pod is not unschedulable")
	}
}
