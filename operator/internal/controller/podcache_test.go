package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A trimmed pod counts as the whole pod does, and carries nothing else of the spec or status.
func TestTrimPodKeepsWhatCountPodsReads(t *testing.T) {
	now := metav1.Now()
	pod := func(phase corev1.PodPhase, ready bool, hash string, deleted *metav1.Time) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web", DeletionTimestamp: deleted,
				Labels:        map[string]string{"kubefstack.io/stack": "web"},
				Annotations:   map[string]string{podcontract.ConfigHashAnnotation: hash},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			Status: corev1.PodStatus{Phase: phase,
				InitContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, Ready: ready, Image: "dp"}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", Ready: true}}},
		}
	}
	full := []corev1.Pod{*pod(corev1.PodRunning, true, "a", nil), *pod(corev1.PodRunning, false, "b", nil),
		*pod(corev1.PodPending, false, "", nil), *pod(corev1.PodSucceeded, true, "a", nil), *pod(corev1.PodRunning, true, "a", &now)}
	trimmed := make([]corev1.Pod, len(full))
	for i := range full {
		out, err := TrimPod(&full[i])
		if err != nil {
			t.Fatal(err)
		}
		trimmed[i] = *out.(*corev1.Pod)
	}
	if got, want := countPods(trimmed, "a"), countPods(full, "a"); got != want {
		t.Fatalf("trimmed pods count %+v, whole pods %+v", got, want)
	}
	p := trimmed[0]
	if len(p.Spec.Containers) != 0 || p.ManagedFields != nil || p.Status.ContainerStatuses != nil || p.Status.InitContainerStatuses[0].Image != "" {
		t.Fatalf("trimmed pod kept more than the controller reads: %+v", p)
	}
	if p.Labels["kubefstack.io/stack"] != "web" || p.Spec.NodeName != "n1" || full[0].ManagedFields == nil {
		t.Fatal("trimming lost the labels or the node, or changed the original")
	}
	// The health events read /status at the pod's IP; a program's dataplane is a regular container.
	prog := pod(corev1.PodRunning, false, "a", nil)
	prog.Status.PodIP = "10.0.0.7"
	prog.Status.ContainerStatuses = append(prog.Status.ContainerStatuses, corev1.ContainerStatus{Name: podcontract.DataplaneContainer, Ready: true, Image: "x"})
	prog.Status.InitContainerStatuses = nil
	out, _ := TrimPod(prog)
	if tp := out.(*corev1.Pod); tp.Status.PodIP != "10.0.0.7" || len(tp.Status.ContainerStatuses) != 1 || !dataplaneReady(tp) || tp.Status.ContainerStatuses[0].Image != "" {
		t.Fatalf("trimmed program pod %+v", tp.Status)
	}
	// The EndpointSlice controller reads the Ready condition and the named container ports.
	svc := pod(corev1.PodRunning, true, "a", nil)
	svc.Spec.Containers = append(svc.Spec.Containers, corev1.Container{Name: "web", Image: "nginx",
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}})
	svc.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, Message: "m"}}
	out, _ = TrimPod(svc)
	if tp := out.(*corev1.Pod); !podReady(tp) || len(tp.Status.Conditions) != 1 || tp.Status.Conditions[0].Message != "" ||
		len(tp.Spec.Containers) != 1 || tp.Spec.Containers[0].Image != "" || containerPort(tp, "http", corev1.ProtocolTCP) != 80 {
		t.Fatalf("trimmed pod for the EndpointSlices: %+v %+v", tp.Spec.Containers, tp.Status.Conditions)
	}
	if out, _ := TrimPod("not a pod"); out != "not a pod" {
		t.Fatal("a non-pod (a tombstone) must pass through")
	}
}
