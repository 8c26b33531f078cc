package chart

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// TestNoSinglePointOfFailure: with the defaults the webhooks, which refuse opted-in pods while
// no replica answers (failurePolicy: Fail), are served by two replicas that a drain evicts one
// at a time (PodDisruptionBudget), a rollout replaces one at a time after its successor is ready
// (maxUnavailable 0), the scheduler spreads over nodes without refusing a one-node cluster, and
// a deleted replica keeps answering until the proxies stop sending it calls.
func TestNoSinglePointOfFailure(t *testing.T) {
	rendered := objects(t, render(t, "default"))
	deploy := operatorDeployment(t, rendered)
	replicas, _ := number(deploy.Object, "spec", "replicas")
	if replicas < 2 {
		t.Errorf("the operator runs %d replica(s) by default; the webhooks need two to survive one pod's loss", replicas)
	}
	podLabels := labels.Set(nestedStrings(t, deploy, "spec", "template", "metadata", "labels"))

	if got, _, _ := unstructured.NestedString(deploy.Object, "spec", "strategy", "type"); got != "RollingUpdate" {
		t.Errorf("strategy.type is %q, want RollingUpdate", got)
	}
	if got, found := number(deploy.Object, "spec", "strategy", "rollingUpdate", "maxUnavailable"); !found || got != 0 {
		t.Errorf("rollingUpdate.maxUnavailable is %d (set: %v), want 0 (a rollout must not stop a replica before its successor serves)", got, found)
	}

	pdbs := find(rendered, "PodDisruptionBudget")
	if len(pdbs) != 1 {
		t.Fatalf("the defaults render %d PodDisruptionBudgets, want 1 for the operator", len(pdbs))
	}
	minAvailable, found := number(pdbs[0].Object, "spec", "minAvailable")
	if !found || minAvailable < 1 || minAvailable >= replicas {
		t.Errorf("PodDisruptionBudget minAvailable %d (found %v): want at least 1 and below the %d replicas", minAvailable, found, replicas)
	}
	if sel := nestedStrings(t, pdbs[0], "spec", "selector", "matchLabels"); !labels.SelectorFromSet(sel).Matches(podLabels) {
		t.Errorf("the PodDisruptionBudget selects %v, not the operator's pods %v", sel, podLabels)
	}

	spread, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "topologySpreadConstraints")
	if !spreadsOverNodes(spread, podLabels) {
		t.Errorf("no topology spread over kubernetes.io/hostname with ScheduleAnyway selecting the operator's pods:\n%s", toYAML(t, spread))
	}

	// The drain is the operator's own (--shutdown-delay): a preStop sleep before it would keep the
	// API server's connections alive through the wait, to be cut when the process stops.
	c := operatorContainer(t, deploy)
	if _, found, _ := unstructured.NestedMap(c, "lifecycle", "preStop"); found {
		t.Errorf("the operator container has a preStop: the process must learn at once that it is leaving, to drain")
	}
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	delay := time.Duration(-1)
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--shutdown-delay="); ok {
			var err error
			if delay, err = time.ParseDuration(v); err != nil {
				t.Fatalf("%s: %v", a, err)
			}
		}
	}
	grace, _ := number(deploy.Object, "spec", "template", "spec", "terminationGracePeriodSeconds")
	if delay < time.Second || delay >= time.Duration(grace)*time.Second {
		t.Errorf("--shutdown-delay %s (args %v) with a %ds grace period: a deleted replica must drain a while, and then have time to stop", delay, args, grace)
	}
}

// TestOneReplicaHasNoBudget: a budget of minAvailable 1 over one replica would block every node
// drain, so one replica renders none; a budget as large as the replicas is refused by name.
func TestOneReplicaHasNoBudget(t *testing.T) {
	out, stderr, err := helm(t, "template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
		"--set", "operator.replicas=1")
	if err != nil {
		t.Fatalf("helm template with one replica: %v\n%s", err, stderr)
	}
	if got := find(objects(t, out), "PodDisruptionBudget"); len(got) != 0 {
		t.Errorf("one replica renders %d PodDisruptionBudget(s); a drain could never evict it", len(got))
	}
	_, stderr, err = helm(t, "template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
		"--set", "operator.replicas=2", "--set", "operator.podDisruptionBudget.minAvailable=2")
	if err == nil || !strings.Contains(stderr, "operator.podDisruptionBudget.minAvailable") || !strings.Contains(stderr, "operator.replicas") {
		t.Errorf("minAvailable equal to replicas rendered (err %v); it should be refused naming both keys:\n%s", err, stderr)
	}
}

func spreadsOverNodes(spread []any, podLabels labels.Set) bool {
	for _, s := range spread {
		m, ok := s.(map[string]any)
		if !ok || m["topologyKey"] != "kubernetes.io/hostname" || m["whenUnsatisfiable"] != "ScheduleAnyway" {
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(m, "labelSelector", "matchLabels")
		if len(sel) > 0 && labels.SelectorFromSet(sel).Matches(podLabels) {
			return true
		}
	}
	return false
}

func operatorDeployment(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	for _, d := range find(objs, "Deployment") {
		if strings.HasSuffix(d.GetName(), "-operator") {
			return d
		}
	}
	t.Fatal("no operator Deployment rendered")
	return nil
}

func operatorContainer(t *testing.T, deploy *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == "operator" {
			return m
		}
	}
	t.Fatal("the operator Deployment has no container named operator")
	return nil
}

func nestedStrings(t *testing.T, o *unstructured.Unstructured, path ...string) map[string]string {
	t.Helper()
	m, found, err := unstructured.NestedStringMap(o.Object, path...)
	if !found || err != nil {
		t.Fatalf("%s %s has no %s: %v", o.GetKind(), o.GetName(), strings.Join(path, "."), err)
	}
	return m
}

// number reads an integer field as the YAML decoder left it (float64); a string such as "25%"
// is not found.
func number(obj map[string]any, path ...string) (int64, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if !found || err != nil {
		return 0, false
	}
	switch n := v.(type) {
	case float64:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}
