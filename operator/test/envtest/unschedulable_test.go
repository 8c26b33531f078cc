package envtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/controller"
)

// An injected pod the scheduler cannot place gets a Warning that names each node failing the
// stack's node requirements, the label it lacks, the node agent's fix from its report and the
// doctor command; a node that meets them is not named. There is no scheduler here: the test
// writes the pod's PodScheduled condition as the scheduler would.
func TestUnschedulablePodSaysWhichNodeLacksWhat(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "unplaced")
	testenv.CreateIfAbsent(t, k8s, si)
	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Name, pod.Labels[fsv1.StackLabel] = "unplaced-a", si.Name
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.DeleteAtEnd(t, k8s, pod)

	// The good node carries every label the injector required; the others lack the vhost-user
	// one (with the agent's report saying why), or everything (no agent ran there).
	want := map[string]string{}
	for _, term := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Operator == corev1.NodeSelectorOpIn {
				want[e.Key] = e.Values[0]
			}
		}
	}
	if want[fsv1.NodeLabelVhostUser] != fsv1.NodeReady {
		t.Fatalf("the injected pod does not require %s: %v", fsv1.NodeLabelVhostUser, want)
	}
	noOVS := map[string]string{}
	for k, v := range want {
		if k != fsv1.NodeLabelVhostUser {
			noOVS[k] = v
		}
	}
	report := &nodecheck.Report{Labels: noOVS, Checks: []nodecheck.Check{
		{Name: "ovsdb", Status: nodecheck.Pass, Label: fsv1.NodeLabelVhostUser},
		{Name: "ovs-bridge", Status: nodecheck.Fail, Label: fsv1.NodeLabelVhostUser, Detail: "bridge br-fstack is system",
			Fix: "ovs-vsctl set bridge br-fstack datapath_type=netdev"},
	}}
	node := func(name string, labels map[string]string, annotations map[string]string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
		if err := k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		testenv.DeleteAtEnd(t, k8s, n)
	}
	node("unplaced-good", want, nil)
	node("unplaced-no-ovs", noOVS, map[string]string{fsv1.NodeReportAnnotation: report.Marshal()})
	node("unplaced-bare", nil, nil)
	// The operator reads the Nodes from its cache: the explanation is made once, so it must
	// see them all.
	testenv.Eventually(t, 10*time.Second, func() error {
		nodes := &metav1.PartialObjectMetadataList{}
		nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
		if err := operatorCache.List(ctx, nodes); err != nil {
			return err
		}
		if len(nodes.Items) < 3 {
			return fmt.Errorf("the operator's cache has %d nodes", len(nodes.Items))
		}
		return nil
	})

	setUnschedulable(t, pod, "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.")
	ev := waitNoNodeEvent(t, pod)
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("event type %s; want Warning", ev.Type)
	}
	for _, part := range []string{
		"2 node(s) lack what StackInstance " + optedInNS + "/" + si.Name + " needs (1 meet it",
		"unplaced-no-ovs: lacks node.kubefstack.io/vhost-user=ready; fix ovs-bridge: ovs-vsctl set bridge br-fstack datapath_type=netdev; run kubectl fstack doctor unplaced-no-ovs",
		"unplaced-bare: lacks node.kubefstack.io/",
		"no node agent report on the node",
		"run kubectl fstack doctor unplaced-bare",
	} {
		if !strings.Contains(ev.Note, part) {
			t.Errorf("the event's note %q lacks %q", ev.Note, part)
		}
	}
	if strings.Contains(ev.Note, "unplaced-good") {
		t.Errorf("the event's note %q names the node that meets the requirements", ev.Note)
	}

	// The scheduler retries and rewrites its message; the explanation, unchanged, is not
	// repeated.
	setUnschedulable(t, pod, "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available")
	time.Sleep(2 * time.Second)
	if n := len(noNodeEvents(t, pod)); n != 1 {
		t.Errorf("%d %s events; want 1", n, controller.EventNoNodeForStack)
	}
}

// setUnschedulable writes the scheduler's verdict on the pod.
func setUnschedulable(t *testing.T, pod *corev1.Pod, message string) {
	t.Helper()
	cur := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = corev1.PodPending
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: message, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	pod.UID = cur.UID
}

func noNodeEvents(t *testing.T, pod *corev1.Pod) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(pod.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.UID == pod.UID && e.Reason == controller.EventNoNodeForStack {
			out = append(out, e)
		}
	}
	return out
}

func waitNoNodeEvent(t *testing.T, pod *corev1.Pod) eventsv1.Event {
	t.Helper()
	var ev eventsv1.Event
	testenv.Eventually(t, 20*time.Second, func() error {
		evs := noNodeEvents(t, pod)
		if len(evs) == 0 {
			return fmt.Errorf("no %s event about %s", controller.EventNoNodeForStack, pod.Name)
		}
		ev = evs[0]
		return nil
	})
	return ev
}
