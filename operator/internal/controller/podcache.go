package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// TrimPod is the transform of the manager's pod cache: it keeps what the controller reads from a
// pod (its metadata without managed fields, its phase, and the name and readiness of its init
// containers' statuses and of a program's dataplane container, the node it runs on, which the
// node check metrics read, and its IP, where the dataplane health events read /status; its Ready
// condition and its containers' names and ports, which the EndpointSlice controller reads) and
// drops the rest. Every pod create with the stack label reaches the
// cache, and each reconcile lists the pods of its StackInstance: trimmed, they cost a fraction
// of the memory, the garbage collector's scanning, and the CPU the operator shares with the
// webhook. Anything that reads pods from the manager's cache sees only these fields.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	t.ManagedFields = nil
	t.Spec.NodeName = p.Spec.NodeName
	t.Status.Phase = p.Status.Phase
	t.Status.PodIP = p.Status.PodIP
	if n := len(p.Status.InitContainerStatuses); n > 0 {
		t.Status.InitContainerStatuses = make([]corev1.ContainerStatus, n)
		for i, s := range p.Status.InitContainerStatuses {
			t.Status.InitContainerStatuses[i] = corev1.ContainerStatus{Name: s.Name, Ready: s.Ready}
		}
	}
	// The EndpointSlice controller reads the pod's Ready condition and the app containers' named
	// ports (a Service's named targetPort).
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			t.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	for _, c := range p.Spec.Containers {
		if len(c.Ports) > 0 {
			t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	// A program's dataplane (spec.program) is a regular container: its readiness only.
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == podcontract.DataplaneContainer {
			t.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: s.Name, Ready: s.Ready}}
		}
	}
	return t, nil
}
