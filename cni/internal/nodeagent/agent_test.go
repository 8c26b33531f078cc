package nodeagent

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

func TestPatchTouchesOnlyOurKeysAndOnlyWhenChanged(t *testing.T) {
	report := &nodecheck.Report{
		Checks: []nodecheck.Check{{Name: "cpu-manager", Status: nodecheck.Pass}},
		Labels: map[string]string{fsv1.NodeLabelCPUManager: "static", fsv1.NodeLabelHugePages("2Mi"): "ready"},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
		"kubernetes.io/hostname":       "n",
		"kubefstack.io/other":          "x", // not under the node prefix: never ours
		fsv1.NodeLabelVhostUser:        "ready",
		fsv1.NodeLabelHugePages("2Mi"): "ready",
	}}}
	var got map[string]map[string]map[string]any
	if err := json.Unmarshal(Patch(node, report), &got); err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]any{fsv1.NodeLabelVhostUser: nil, fsv1.NodeLabelCPUManager: "static"}
	if !reflect.DeepEqual(got["metadata"]["labels"], wantLabels) {
		t.Errorf("labels patch %v, want %v", got["metadata"]["labels"], wantLabels)
	}
	if got["metadata"]["annotations"][fsv1.NodeReportAnnotation] != report.Marshal() {
		t.Errorf("annotation patch %v", got["metadata"]["annotations"])
	}

	node.Labels = map[string]string{"kubernetes.io/hostname": "n", fsv1.NodeLabelCPUManager: "static", fsv1.NodeLabelHugePages("2Mi"): "ready"}
	node.Annotations = map[string]string{fsv1.NodeReportAnnotation: report.Marshal()}
	if p := Patch(node, report); p != nil {
		t.Errorf("a node that already carries the report got patch %s", p)
	}
}
