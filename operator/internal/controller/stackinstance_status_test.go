package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func TestReadyCondition(t *testing.T) {
	cases := []struct {
		name    string
		valid   bool
		n       podCounts
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"invalid", false, podCounts{Bound: 3, Ready: 3}, metav1.ConditionFalse, fsv1.ReasonInvalidSpec, "see the Valid condition"},
		{"no pods", true, podCounts{}, metav1.ConditionFalse, fsv1.ReasonNoBoundPods, "label pods kubefstack.io/stack=web"},
		{"some ready", true, podCounts{Bound: 3, Ready: 1}, metav1.ConditionFalse, fsv1.ReasonPodsNotReady, "1 of 3 pods have a ready dataplane"},
		{"all ready", true, podCounts{Bound: 3, Ready: 3}, metav1.ConditionTrue, fsv1.ReasonAllPodsReady, "3 of 3 pods have a ready dataplane"},
		{"older config", true, podCounts{Bound: 3, Ready: 3, Older: 2}, metav1.ConditionTrue, fsv1.ReasonOlderConfig, "2 of 3 pods run an older config"},
		{"older and not ready", true, podCounts{Bound: 3, Ready: 2, Older: 1}, metav1.ConditionFalse, fsv1.ReasonPodsNotReady, "1 of 3 pods run an older config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := readyCondition(c.valid, c.n, 7, "web")
			if got.Status != c.status || got.Reason != c.reason || !strings.Contains(got.Message, c.message) || got.ObservedGeneration != 7 {
				t.Fatalf("got %+v, want %s/%s with %q", got, c.status, c.reason, c.message)
			}
		})
	}
}

func TestValidCondition(t *testing.T) {
	ok := validCondition(nil, 2)
	if ok.Status != metav1.ConditionTrue || ok.Reason != fsv1.ReasonValid {
		t.Fatalf("got %+v", ok)
	}
	bad := validCondition(field.ErrorList{field.Required(field.NewPath("spec", "ports"), "add one")}, 2)
	if bad.Status != metav1.ConditionFalse || bad.Reason != fsv1.ReasonInvalidSpec || !strings.Contains(bad.Message, "spec.ports: Required value: add one") {
		t.Fatalf("got %+v", bad)
	}
	long := validCondition(field.ErrorList{field.Invalid(field.NewPath("spec"), strings.Repeat("x", 40000), "too long")}, 2)
	if len(long.Message) > maxConditionMessage {
		t.Fatalf("message of %d bytes exceeds the API's limit", len(long.Message))
	}
}

func TestCountPods(t *testing.T) {
	pod := func(phase corev1.PodPhase, ready bool, hash string, deleting bool) corev1.Pod {
		p := corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
		p.Annotations = map[string]string{podcontract.ConfigHashAnnotation: hash}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, Ready: ready}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	got := countPods([]corev1.Pod{
		pod(corev1.PodRunning, true, "h1", false),
		pod(corev1.PodRunning, false, "h0", false),
		pod(corev1.PodPending, false, "h1", false),
		pod(corev1.PodSucceeded, true, "h1", false),
		pod(corev1.PodRunning, true, "h1", true),
	}, "h1")
	if want := (podCounts{Bound: 3, Ready: 1, Older: 1}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// A program's dataplane (spec.program) is a regular container of the same name.
	program := pod(corev1.PodRunning, true, "h1", false)
	program.Status.ContainerStatuses, program.Status.InitContainerStatuses = program.Status.InitContainerStatuses, nil
	if got := countPods([]corev1.Pod{program}, "h1"); got != (podCounts{Bound: 1, Ready: 1}) {
		t.Fatalf("a ready program pod: got %+v, want 1 bound, 1 ready", got)
	}
}

func TestTransitions(t *testing.T) {
	old := []metav1.Condition{{Type: fsv1.ConditionValid, Status: metav1.ConditionTrue, Reason: fsv1.ReasonValid}}
	updated := []metav1.Condition{
		{Type: fsv1.ConditionValid, Status: metav1.ConditionTrue, Reason: fsv1.ReasonValid, Message: "new words"},
		{Type: fsv1.ConditionReady, Status: metav1.ConditionFalse, Reason: fsv1.ReasonNoBoundPods},
	}
	if got := transitions(old, updated); len(got) != 0 {
		t.Fatalf("got %+v, want none: a new message is no transition, a first healthy condition no news", got)
	}
	updated[1].Reason = fsv1.ReasonPodsNotReady
	old = append(old, v1Cond(fsv1.ConditionReady, fsv1.ReasonNoBoundPods))
	if got := transitions(old, updated); len(got) != 1 || got[0].Type != fsv1.ConditionReady {
		t.Fatalf("got %+v, want the Ready transition", got)
	}
	first := []metav1.Condition{v1Cond(fsv1.ConditionValid, fsv1.ReasonInvalidSpec)}
	if got := transitions(nil, first); len(got) != 1 {
		t.Fatalf("a first condition that reports a problem must be an event, got %+v", got)
	}
}

func v1Cond(t, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason}
}

func TestConfigMapCondition(t *testing.T) {
	cases := []struct {
		name    string
		valid   bool
		err     error
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"written", true, nil, metav1.ConditionTrue, fsv1.ReasonConfigMapOK, "ConfigMap web/s-fstack holds"},
		{"invalid", false, nil, metav1.ConditionFalse, fsv1.ReasonInvalidSpec, "see the Valid condition"},
		{"conflict", true, fmt.Errorf("ensure: %w", &ConflictError{Namespace: "web", Name: "s-fstack"}), metav1.ConditionFalse,
			fsv1.ReasonConfigMapConflict, "ConfigMap web/s-fstack exists and is not this StackInstance's"},
		{"failed", true, errors.New("forbidden"), metav1.ConditionFalse, fsv1.ReasonConfigMapFailed, "writing ConfigMap web/s-fstack failed (retrying): forbidden"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := configMapCondition(c.valid, c.err, 3, "web", "s")
			if got.Type != fsv1.ConditionConfigMap || got.Status != c.status || got.Reason != c.reason ||
				!strings.Contains(got.Message, c.message) || got.ObservedGeneration != 3 {
				t.Fatalf("got %+v, want %s/%s with %q", got, c.status, c.reason, c.message)
			}
		})
	}
	// A conflict is news the first time it is seen, unlike a first healthy condition.
	if got := transitions(nil, []metav1.Condition{v1Cond(fsv1.ConditionConfigMap, fsv1.ReasonConfigMapConflict)}); len(got) != 1 {
		t.Fatalf("a first ConfigMapConflict must be an event, got %+v", got)
	}
}
