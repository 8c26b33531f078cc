package controller

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/api/meta"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

const (
	maxConditionMessage  = 32 * 1024
	injectionNamespaceOK = "enabled"
)

// podCounts is what the controller observed of the pods bound to a StackInstance.
type podCounts struct {
	Bound, Ready, Older int32
}

// countPods counts the live pods, those whose dataplane reports ready, and those admitted with
// another config than hash.
func countPods(pods []corev1.Pod, hash string) podCounts {
	var c podCounts
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		c.Bound++
		if dataplaneReady(p) {
			c.Ready++
		}
		if h := p.Annotations[podcontract.ConfigHashAnnotation]; h != "" && h != hash {
			c.Older++
		}
	}
	return c
}

func dataplaneReady(p *corev1.Pod) bool {
	// The injected sidecar is an init container; a program's dataplane (spec.program) a
	// regular one.
	for _, s := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if s.Name == podcontract.DataplaneContainer {
			return s.Ready
		}
	}
	return false
}

// validCondition says whether the spec passes every check possible before a pod starts.
func validCondition(errs field.ErrorList, generation int64) v1.Condition {
	c := v1.Condition{Type: fsv1.ConditionValid, ObservedGeneration: generation}
	if len(errs) == 0 {
		c.Status, c.Reason, c.Message = v1.ConditionTrue, fsv1.ReasonValid, "the spec passes every check possible before a pod starts"
		return c
	}
	c.Status, c.Reason = v1.ConditionFalse, fsv1.ReasonInvalidSpec
	c.Message = truncate(fmt.Sprintf("fix the spec; pods naming this StackInstance are refused until then: %s", errs.ToAggregate().Error()))
	return c
}

// readyCondition says whether every bound pod runs the stack, and which pods run an older config.
func readyCondition(valid bool, n podCounts, generation int64, name string) v1.Condition {
	c := v1.Condition{Type: fsv1.ConditionReady, ObservedGeneration: generation, Status: v1.ConditionFalse}
	switch {
	case !valid:
		c.Reason, c.Message = fsv1.ReasonInvalidSpec, "the spec is not valid: see the Valid condition"
	case n.Bound == 0:
		c.Reason = fsv1.ReasonNoBoundPods
		c.Message = fmt.Sprintf("no pod names this StackInstance: label pods %s=%s in a namespace labelled %s=%s",
			fsv1.StackLabel, name, fsv1.InjectionLabel, injectionNamespaceOK)
	case n.Ready < n.Bound:
		c.Reason = fsv1.ReasonPodsNotReady
		c.Message = fmt.Sprintf("%d of %d pods have a ready dataplane", n.Ready, n.Bound)
	default:
		c.Status, c.Reason = v1.ConditionTrue, fsv1.ReasonAllPodsReady
		c.Message = fmt.Sprintf("%d of %d pods have a ready dataplane", n.Ready, n.Bound)
	}
	if valid && n.Older > 0 {
		if c.Status == v1.ConditionTrue {
			c.Reason = fsv1.ReasonOlderConfig
		}
		c.Message += fmt.Sprintf("; %d of %d pods run an older config: running pods keep the config they started with, recreate them (e.g. kubectl rollout restart) to apply the current spec", n.Older, n.Bound)
	}
	return c
}

// podListFailedCondition says that the bound pods could not be listed: the counts in the status
// are the last ones observed, so Ready is Unknown rather than what they would say.
func podListFailedCondition(err error, generation int64, name string) v1.Condition {
	return v1.Condition{Type: fsv1.ConditionReady, ObservedGeneration: generation, Status: v1.ConditionUnknown,
		Reason: fsv1.ReasonPodListFailed,
		Message: truncate(fmt.Sprintf("listing the pods labelled %s=%s failed (retrying; the counts are the last observed): %v",
			fsv1.StackLabel, name, err))}
}

// configMapCondition says whether the ConfigMap <name>-fstack holds the preview of the current
// spec; err is what writing it returned.
func configMapCondition(valid bool, err error, generation int64, namespace, name string) v1.Condition {
	c := v1.Condition{Type: fsv1.ConditionConfigMap, ObservedGeneration: generation, Status: v1.ConditionFalse}
	cm := namespace + "/" + ConfigMapName(name)
	var conflict *ConflictError
	switch {
	case !valid:
		c.Reason, c.Message = fsv1.ReasonInvalidSpec, "the spec is not valid, so nothing was rendered: see the Valid condition"
	case errors.As(err, &conflict):
		c.Reason = fsv1.ReasonConfigMapConflict
		c.Message = conflict.Error() + ": delete or rename that ConfigMap to get the rendered preview here (or rename the StackInstance); " +
			"pods are injected either way, the preview is only for reading"
	case err != nil:
		c.Reason, c.Message = fsv1.ReasonConfigMapFailed, truncate(fmt.Sprintf("writing ConfigMap %s failed (retrying): %v", cm, err))
	default:
		c.Status, c.Reason = v1.ConditionTrue, fsv1.ReasonConfigMapOK
		c.Message = fmt.Sprintf("ConfigMap %s holds the spec with defaults, a preview config.ini and the EAL argv", cm)
	}
	return c
}

// problem reasons are Warning events, and news even on a condition's first appearance.
func problem(reason string) bool {
	switch reason {
	case fsv1.ReasonInvalidSpec, fsv1.ReasonConfigMapConflict, fsv1.ReasonConfigMapFailed, fsv1.ReasonPodListFailed:
		return true
	}
	return false
}

func truncate(s string) string {
	if len(s) > maxConditionMessage {
		return s[:maxConditionMessage-3] + "..."
	}
	return s
}

// transitions lists the conditions whose status or reason differ between old and updated. A
// condition seen for the first time is news only when it reports a problem: a thousand new
// healthy StackInstances should not cost the API server two thousand events.
func transitions(old, updated []v1.Condition) []v1.Condition {
	var out []v1.Condition
	for _, c := range updated {
		prev := metav1.FindStatusCondition(old, c.Type)
		if prev == nil && !problem(c.Reason) {
			continue
		}
		if prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
			out = append(out, c)
		}
	}
	return out
}
