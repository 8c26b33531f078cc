package nodefit

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

// noteMax is the operator's: events.k8s.io takes a note of 1 KiB at most.
const noteMax = 1000

func nodeMeta(name string, labels map[string]string, report *nodecheck.Report) metav1.PartialObjectMetadata {
	n := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if report != nil {
		n.Annotations = map[string]string{fsv1.NodeReportAnnotation: report.Marshal()}
	}
	return n
}

// stackSpec requires what the injector requires of a vhost-user stack's node, and a
// DataNetwork's zone label.
func stackSpec() *corev1.PodSpec {
	in := func(k, v string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}}
	}
	return &corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{
				in(fsv1.NodeLabelHugePages("2Mi"), fsv1.NodeReady), in(fsv1.NodeLabelVhostUser, fsv1.NodeReady), in("zone", "a")},
		}}}}}}
}

func TestNodeFailuresNameWhatEachNodeLacks(t *testing.T) {
	ready := map[string]string{fsv1.NodeLabelHugePages("2Mi"): fsv1.NodeReady, fsv1.NodeLabelVhostUser: fsv1.NodeReady, "zone": "a"}
	noOVS := map[string]string{fsv1.NodeLabelHugePages("2Mi"): fsv1.NodeReady, "zone": "a"}
	report := &nodecheck.Report{Checks: []nodecheck.Check{
		{Name: "hugepages-2Mi", Status: nodecheck.Pass, Label: fsv1.NodeLabelHugePages("2Mi")},
		{Name: "ovs-dpdk-init", Status: nodecheck.Pass, Label: fsv1.NodeLabelVhostUser},
		{Name: "ovs-bridge", Status: nodecheck.Fail, Label: fsv1.NodeLabelVhostUser, Fix: "ovs-vsctl add-br br0 -- set bridge br0 datapath_type=netdev"},
	}}
	otherZone := map[string]string{fsv1.NodeLabelHugePages("2Mi"): fsv1.NodeReady, fsv1.NodeLabelVhostUser: fsv1.NodeReady, "zone": "b"}
	nodes := []metav1.PartialObjectMetadata{
		nodeMeta("good", ready, nil), nodeMeta("no-ovs", noOVS, report), nodeMeta("bare", nil, nil), nodeMeta("zone-b", otherZone, report),
	}
	failing, fitting := Failures(stackSpec(), nodes)
	if fitting != 1 || len(failing) != 3 {
		t.Fatalf("fitting %d, failing %+v; want 1 and 3", fitting, failing)
	}
	want := []Failure{
		{Node: "bare", Misses: []string{"lacks node.kubefstack.io/hugepages-2Mi=ready", "lacks node.kubefstack.io/vhost-user=ready", "lacks zone=a"},
			Fixes: []string{"no node agent report on the node: is kube-fstack's node agent (the CNI DaemonSet) running there?"}},
		{Node: "no-ovs", Misses: []string{"lacks node.kubefstack.io/vhost-user=ready"},
			Fixes: []string{"fix ovs-bridge: ovs-vsctl add-br br0 -- set bridge br0 datapath_type=netdev"}},
		{Node: "zone-b", Misses: []string{"has zone=b, not a"}},
	}
	if fmt.Sprint(failing) != fmt.Sprint(want) {
		t.Fatalf("failing\n%+v\nwant\n%+v", failing, want)
	}
	msg := Note("web/vhost-user", failing, fitting, noteMax)
	for _, part := range []string{"3 node(s) lack what StackInstance web/vhost-user needs", "(1 meet it",
		"no-ovs: lacks node.kubefstack.io/vhost-user=ready; fix ovs-bridge: ovs-vsctl add-br br0", "run kubectl fstack doctor no-ovs"} {
		if !strings.Contains(msg, part) {
			t.Errorf("note %q lacks %q", msg, part)
		}
	}
	if strings.Contains(msg, "good") {
		t.Errorf("note %q names the node that meets the requirements", msg)
	}

	// A node that meets one of the ORed terms fits.
	spec := stackSpec()
	terms := &spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	*terms = append(*terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}})
	if failing, fitting := Failures(spec, nodes); fitting != 2 || len(failing) != 2 {
		t.Fatalf("with a second term: fitting %d, failing %+v", fitting, failing)
	}
	// Nothing to explain when every node meets the selection.
	if failing, fitting := Failures(stackSpec(), nodes[:1]); Note("s", failing, fitting, noteMax) != "" {
		t.Fatal("a note with no failing node")
	}
}

func TestUnschedulableNoteIsBounded(t *testing.T) {
	long := strings.Repeat("ovs-vsctl set Open_vSwitch . other_config:dpdk-init=true ", 10)
	var failing []Failure
	for i := range 40 {
		failing = append(failing, Failure{Node: fmt.Sprintf("worker-%02d", i),
			Misses: []string{"lacks node.kubefstack.io/vhost-user=ready", "lacks node.kubefstack.io/hugepages-1Gi=ready"},
			Fixes:  []string{cut("fix ovs-dpdk-init: "+long, maxFixLen), cut("fix hugepages-1Gi: "+long, maxFixLen)}})
	}
	msg := Note("web/big", failing, 0, noteMax)
	if len(msg) > noteMax {
		t.Fatalf("note of %d bytes; want it within %d", len(msg), noteMax)
	}
	listed := strings.Count(msg, "run kubectl fstack doctor ")
	if listed < 1 || listed > MaxNodesListed {
		t.Fatalf("%d nodes listed in %q", listed, msg)
	}
	if !strings.HasSuffix(msg, fmt.Sprintf(" | and %d more (kubectl fstack doctor lists every node)", 40-listed)) {
		t.Fatalf("note %q does not count the rest", msg)
	}
	if !strings.Contains(msg, "worker-00: lacks node.kubefstack.io/vhost-user=ready") {
		t.Fatalf("note %q does not start with the first node", msg)
	}

	// Short lines: exactly MaxNodesListed nodes, the rest counted.
	var short []Failure
	for i := range 8 {
		short = append(short, Failure{Node: fmt.Sprintf("n%d", i), Misses: []string{"lacks zone=a"}})
	}
	msg = Note("web/s", short, 0, noteMax)
	if n := strings.Count(msg, "run kubectl fstack doctor "); n != MaxNodesListed || !strings.HasSuffix(msg, "and 3 more (kubectl fstack doctor lists every node)") {
		t.Fatalf("note %q: %d listed", msg, n)
	}
	// All of them when they fit.
	if msg = Note("web/s", short[:MaxNodesListed], 0, noteMax); strings.Contains(msg, "more") {
		t.Fatalf("note %q counts more than there are", msg)
	}
}

func TestRequirementMiss(t *testing.T) {
	labels := map[string]string{"a": "1", "n": "7"}
	for _, c := range []struct {
		op     corev1.NodeSelectorOperator
		key    string
		values []string
		want   string
	}{
		{corev1.NodeSelectorOpIn, "a", []string{"1"}, ""},
		{corev1.NodeSelectorOpIn, "a", []string{"2", "3"}, "has a=1, not one of 2, 3"},
		{corev1.NodeSelectorOpIn, "b", []string{"1", "2", "3", "4"}, "lacks b (one of 1, 2, 3, ... (4))"},
		{corev1.NodeSelectorOpNotIn, "a", []string{"1"}, "has a=1, which the pod excludes"},
		{corev1.NodeSelectorOpNotIn, "b", []string{"1"}, ""},
		{corev1.NodeSelectorOpExists, "b", nil, "lacks b"},
		{corev1.NodeSelectorOpDoesNotExist, "a", nil, "has a=1, which the pod excludes"},
		{corev1.NodeSelectorOpGt, "n", []string{"5"}, ""},
		{corev1.NodeSelectorOpLt, "n", []string{"5"}, "has n=7, not Lt 5"},
	} {
		got := requirementMiss(corev1.NodeSelectorRequirement{Key: c.key, Operator: c.op, Values: c.values}, labels)
		if got != c.want {
			t.Errorf("%s %s %v: %q; want %q", c.key, c.op, c.values, got, c.want)
		}
	}
}
