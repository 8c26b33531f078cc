package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func boundPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web", ResourceVersion: "1",
			Labels:      map[string]string{fsv1.StackLabel: "web", "app": "nginx"},
			Annotations: map[string]string{podcontract.ConfigHashAnnotation: "h1", "note": "a"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, Ready: true}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", Ready: true}}},
	}
}

// Each update that can move the counts passes; the updates kubelet and users make for other
// reasons do not. Every case is also held against countPods itself: an update the predicate
// drops must leave the counts as they were, whatever the StackInstance's current hash.
func TestPodCountsChanged(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		name   string
		change func(p *corev1.Pod)
		want   bool
	}{
		{"unrelated annotation", func(p *corev1.Pod) { p.Annotations["note"] = "b" }, false},
		{"unrelated label", func(p *corev1.Pod) { p.Labels["app"] = "other" }, false},
		{"app container readiness", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = false }, false},
		{"dataplane restart count", func(p *corev1.Pod) { p.Status.InitContainerStatuses[0].RestartCount = 3 }, false},
		{"pod conditions", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		}, false},
		{"stack label changed", func(p *corev1.Pod) { p.Labels[fsv1.StackLabel] = "other" }, true},
		{"stack label removed", func(p *corev1.Pod) { delete(p.Labels, fsv1.StackLabel) }, true},
		{"deleted", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, true},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, true},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, true},
		{"dataplane not ready", func(p *corev1.Pod) { p.Status.InitContainerStatuses[0].Ready = false }, true},
		{"dataplane status gone", func(p *corev1.Pod) { p.Status.InitContainerStatuses = nil }, true},
		{"config hash", func(p *corev1.Pod) { p.Annotations[podcontract.ConfigHashAnnotation] = "h2" }, true},
	}
	pred := PodCountsChanged()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, cur := boundPod(), boundPod()
			c.change(cur)
			cur.ResourceVersion = "2"
			if got := pred.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != c.want {
				t.Fatalf("Update passed=%v, want %v", got, c.want)
			}
			if c.want {
				return
			}
			for _, hash := range []string{"h1", "h2"} {
				if a, b := countPods([]corev1.Pod{*old}, hash), countPods([]corev1.Pod{*cur}, hash); a != b {
					t.Fatalf("the predicate drops an update that moves the counts (hash %s): %+v -> %+v", hash, a, b)
				}
			}
		})
	}
	if !pred.Create(event.CreateEvent{Object: boundPod()}) || !pred.Delete(event.DeleteEvent{Object: boundPod()}) ||
		!pred.Generic(event.GenericEvent{Object: boundPod()}) {
		t.Fatal("creates, deletes and generic events must always pass")
	}
}
