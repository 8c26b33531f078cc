package nodemetrics

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

func node(name string, checks ...nodecheck.Check) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if checks != nil {
		n.Annotations = map[string]string{fsv1.NodeReportAnnotation: (&nodecheck.Report{Checks: checks}).Marshal()}
	}
	return n
}

func boundPod(ns, name, stack, nodeName string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fsv1.StackLabel: stack}},
		Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func newReader(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = fsv1.AddToScheme(s)
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// TestChecksFailedAndNeeded: a check is "needed" on a node only where a pod bound to a
// StackInstance runs whose injected node affinity asks for the check's label: the vhost-user
// sample needs the vhost-user label, not vfio, so vfio failing on its node alerts nobody, and a
// node without F-Stack pods needs nothing.
func TestChecksFailedAndNeeded(t *testing.T) {
	stack := fixtures.Stack(t, "vhost-user")
	stack.Namespace = "web"
	checks := []nodecheck.Check{
		{Name: "ovs-bridge", Status: nodecheck.Fail, Label: fsv1.NodeLabelVhostUser},
		{Name: "vfio", Status: nodecheck.Fail, Label: fsv1.NodeLabelVFIO},
		{Name: "cpu-manager", Status: nodecheck.Pass, Label: fsv1.NodeLabelCPUManager},
		{Name: "aslr", Status: nodecheck.Warn, Label: fsv1.NodeLabelASLR},
	}
	r := newReader(t, stack, node("n1", checks...), node("n2", checks...), node("n3"),
		boundPod("web", "a", "vhost-user", "n1"), boundPod("other", "b", "vhost-user", "n2"))
	c := New(r)
	got := gather(t, c)
	want := []string{
		`kubefstack_node_check_failed{check="aslr",needed="false",node="n1"} 0`,
		`kubefstack_node_check_failed{check="aslr",needed="false",node="n2"} 0`,
		`kubefstack_node_check_failed{check="cpu-manager",needed="true",node="n1"} 0`,
		`kubefstack_node_check_failed{check="cpu-manager",needed="false",node="n2"} 0`,
		`kubefstack_node_check_failed{check="ovs-bridge",needed="true",node="n1"} 1`,
		`kubefstack_node_check_failed{check="ovs-bridge",needed="false",node="n2"} 1`,
		`kubefstack_node_check_failed{check="vfio",needed="false",node="n1"} 1`,
		`kubefstack_node_check_failed{check="vfio",needed="false",node="n2"} 1`,
		`kubefstack_node_reports_read_up 1`,
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// gather is every sample c exports, as exposition lines, sorted.
func gather(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			line := mf.GetName()
			if len(labels) > 0 {
				line += "{" + strings.Join(labels, ",") + "}"
			}
			out = append(out, fmt.Sprintf("%s %v", line, m.GetGauge().GetValue()))
		}
	}
	sort.Strings(out)
	return out
}

// TestHostileReport: a report another writer put on a Node neither fails the scrape nor floods
// it: unparsable ones are skipped, duplicate names count once, long names and checks past the
// bound are dropped.
func TestHostileReport(t *testing.T) {
	checks := []nodecheck.Check{{Name: "x", Status: nodecheck.Fail}, {Name: "x", Status: nodecheck.Pass}, {Name: strings.Repeat("y", 64)}}
	for i := 0; i < 100; i++ {
		checks = append(checks, nodecheck.Check{Name: "c" + strings.Repeat("z", i%60) + string(rune('a'+i%26)), Status: nodecheck.Pass})
	}
	bad := node("bad")
	bad.Annotations = map[string]string{fsv1.NodeReportAnnotation: "{not json"}
	got, err := New(newReader(t, node("n", checks...), bad)).Results(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxChecksPerNode {
		t.Fatalf("%d results, want the bound %d", len(got), maxChecksPerNode)
	}
	seen := map[string]bool{}
	for _, r := range got {
		if r.Node != "n" || seen[r.Check] || len(r.Check) > maxNameLen {
			t.Fatalf("result %+v: from the bad node, a duplicate, or too long", r)
		}
		seen[r.Check] = true
	}
	if !got[0].Failed {
		t.Error("the first of two checks named x must count")
	}
}
