package cli

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// A pending injected pod the scheduler could not place says in its row which node lacks which
// of the stack's labels and the doctor command; a node that has them is not named.
func TestStatusSaysWhyAPodIsUnschedulable(t *testing.T) {
	good := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a-good", Labels: map[string]string{fsv1.NodeLabelVhostUser: fsv1.NodeReady}}}
	bad := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b-no-ovs"}}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(good, bad).Build()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "p", Annotations: map[string]string{fsv1.StatusAnnotation: "{}"}},
		Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: fsv1.NodeLabelVhostUser, Operator: corev1.NodeSelectorOpIn, Values: []string{fsv1.NodeReady}}},
			}}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	placed := pod.DeepCopy()
	placed.Name, placed.Status.Conditions = "placed", nil
	why, err := unschedulableWhy(context.Background(), c, []*corev1.Pod{pod, placed})
	if err != nil {
		t.Fatal(err)
	}
	if len(why) != 1 {
		t.Fatalf("explained %v; want the unschedulable pod alone", why)
	}
	l := newStackStatusList()
	l.addStack(&fsv1.StackInstance{}, []corev1.Pod{*pod}, podStatuses{unschedulable: why})
	state, _ := dataplaneColumns(l.Items[0].Pods[0])
	want := "Unschedulable: 1 node(s) lack what the stack needs; b-no-ovs lacks node.kubefstack.io/vhost-user=ready (kubectl fstack doctor b-no-ovs)"
	if state != want {
		t.Fatalf("dataplane column %q; want %q", state, want)
	}
	if strings.Contains(state, "a-good") {
		t.Fatalf("%q names the node that has the label", state)
	}
}
