package nodeagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
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

// The agent installs the profile, leaves an identical one alone, and replaces an edited one or a
// planted symlink by a file of its own (rename replaces the link, never writes through it).
func TestInstallSeccomp(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, podcontract.SeccompProfileFile)
	profile := []byte(`{"defaultAction":"SCMP_ACT_ERRNO"}`)
	if err := InstallSeccomp(dir, profile); err != nil {
		t.Fatal(err)
	}
	st1, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := InstallSeccomp(dir, profile); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(file); !os.SameFile(st1, st2) {
		t.Error("an identical profile was rewritten")
	}
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(file)
	if err := os.Symlink(target, file); err != nil {
		t.Fatal(err)
	}
	if err := InstallSeccomp(dir, profile); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(target); string(got) != "keep" {
		t.Errorf("the symlink's target was written: %q", got)
	}
	if st, err := os.Lstat(file); err != nil || !st.Mode().IsRegular() {
		t.Errorf("profile is not a regular file after install: %v %v", st, err)
	}
	if got, _ := os.ReadFile(file); string(got) != string(profile) {
		t.Errorf("profile %q, want %q", got, profile)
	}
}
