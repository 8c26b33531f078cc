package controller

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// PodCountsChanged lets through only the pod events that can move a StackInstance's status:
// creates, deletes, and updates that change what countPods reads (the stack label, the deletion
// timestamp, the phase, the dataplane's readiness, the config-hash annotation). Kubelet updates a
// running pod's status for many other reasons (probes of the app, restarts of other containers,
// conditions); each of those would otherwise re-render the pod's stack.
func PodCountsChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.Pod)
			cur, okNew := e.ObjectNew.(*corev1.Pod)
			if !okOld || !okNew {
				return true // not a typed pod: let it through rather than lose a change
			}
			return countsMayDiffer(old, cur)
		},
	}
}

// countsMayDiffer compares every field countPods and podToStack read.
func countsMayDiffer(old, cur *corev1.Pod) bool {
	return old.Labels[fsv1.StackLabel] != cur.Labels[fsv1.StackLabel] ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		old.Status.Phase != cur.Status.Phase ||
		dataplaneReady(old) != dataplaneReady(cur) ||
		old.Annotations[podcontract.ConfigHashAnnotation] != cur.Annotations[podcontract.ConfigHashAnnotation]
}
