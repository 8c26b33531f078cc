package inject

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/fixtures"
)

// Adding the requirements again changes nothing, and with NodeAffinity off the pod keeps exactly
// the affinity it came with (none).
func TestNodeAffinityIdempotentAndOptional(t *testing.T) {
	stacks := fixtures.Stacks(t)
	pod := fixtures.LoadPod(t, "nginx-vhost")
	out, _, err := Inject(pod, stacks["vhost-user"], testConfig())
	if err != nil {
		t.Fatal(err)
	}
	prep, err := Prepare(stacks["vhost-user"], testConfig())
	if err != nil {
		t.Fatal(err)
	}
	again := out.Spec.DeepCopy()
	addNodeAffinity(again, prep.nodeRequirements())
	if diff := cmp.Diff(&out.Spec, again); diff != "" {
		t.Errorf("second addNodeAffinity changed the pod (-once +twice):\n%s", diff)
	}
	if got := len(out.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions); got != 3 {
		t.Errorf("vhost-user stack: %d requirements, want 3 (cpu-manager, hugepages, vhost-user)", got)
	}

	cfg := testConfig()
	cfg.NodeAffinity = false
	off, _, err := Inject(pod, stacks["vhost-user"], cfg)
	if err != nil {
		t.Fatal(err)
	}
	if off.Spec.Affinity != (*corev1.Affinity)(nil) {
		t.Errorf("NodeAffinity off still added %+v", off.Spec.Affinity)
	}
}
