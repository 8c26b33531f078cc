package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fstackv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

// The labels the suite's StackInstance needs (vhost-user port, 2Mi pages), as the injector
// requires them.
var stackNodeLabels = map[string]string{
	fstackv1.NodeLabelCPUManager:       fstackv1.NodeCPUManagerStatic,
	fstackv1.NodeLabelHugePages("2Mi"): fstackv1.NodeReady,
	fstackv1.NodeLabelVhostUser:        fstackv1.NodeReady,
}

// checkNodeAgentGatesScheduling: the node agent labels the local node; with the OVS bridge
// deleted it takes the vhost-user label away and a new injected pod stays Pending, the
// scheduler naming the node affinity; with the bridge back the label returns and the pod runs.
// The agent checks every 5 s here (hack/cluster/install.sh), so every wait is a poll with a
// generous deadline.
func checkNodeAgentGatesScheduling(t *testing.T) {
	report := waitNodeLabels(t, "the node agent's labels on a fit node", func(l map[string]string) bool { return hasAll(l, stackNodeLabels) })
	for _, c := range report.Failed() {
		// The node has no IOMMU and no 1Gi pages, and ASLR is informational: only the checks
		// behind the labels this stack needs must not fail (a warning keeps the label).
		if _, needed := stackNodeLabels[c.Label]; needed && c.Status == nodecheck.Fail {
			t.Errorf("check %s %s on the local node: %s (%s)", c.Name, c.Status, c.Detail, c.Fix)
		} else {
			t.Logf("check %s %s: %s", c.Name, c.Status, c.Detail)
		}
	}
	// Kernel TCP through OVS: reported, never a label (the local cluster's OVS runs in its own
	// namespace, so the bridge's kernel ports are not the agent's to see; the check says so).
	if c := findCheck(report, "kernel-tcp-checksum"); c.Name == "" || c.Label != "" {
		t.Errorf("report's kernel-tcp-checksum check %+v, want one that decides no label", c)
	} else {
		t.Logf("check kernel-tcp-checksum %s: %s", c.Status, c.Detail)
	}
	if c := findCheck(report, "ovs-userspace-tso"); !strings.HasPrefix(c.Detail, "other_config:userspace-tso-enable=") {
		t.Errorf("report's ovs-userspace-tso check %+v, want OVS's setting", c)
	}
	// The switch checks on the real OVS-DPDK and the real kubelet's checkpoint: DPDK up, the
	// node's own veth (fsk-node-o) as the bridge's uplink, and the PMD on CPU 0 (pmd-cpu-mask=0x1),
	// the CPU the kubelet reserves for kubeReserved 100m. (On kind the host's OVS is the user's:
	// the loop above holds it to not failing.)
	for name, detail := range map[string]string{
		"ovs-dpdk-init": "dpdk_initialized=true",
		"ovs-uplink":    "up: fsk-node-o (system)",
		"ovs-pmd-cpus":  "PMD CPUs 0 (pmd-cpu-mask=0x1), all outside the kubelet's exclusive pool (reserved CPUs 0:",
	} {
		if len(env.NodeExec) > 0 {
			break
		}
		if c := findCheck(report, name); c.Status != nodecheck.Pass || c.Label != fstackv1.NodeLabelVhostUser || !strings.Contains(c.Detail, detail) {
			t.Errorf("report's %s check %+v, want a pass deciding the vhost-user label with %q", name, c, detail)
		}
	}
	restore := func() {
		if _, err := env.Vsctl("--timeout=30", "--may-exist", "add-br", env.OVSBridge, "--", "set", "bridge", env.OVSBridge, "datapath_type=netdev"); err != nil {
			t.Errorf("restore the bridge: %v", err)
		}
	}
	t.Cleanup(restore) // whatever fails below, the rest of the suite gets its bridge back
	if _, err := env.Vsctl("--timeout=30", "del-br", env.OVSBridge); err != nil {
		t.Fatal(err)
	}
	report = waitNodeLabels(t, "the vhost-user label gone with the bridge", func(l map[string]string) bool {
		_, ok := l[fstackv1.NodeLabelVhostUser]
		return !ok
	})
	if c := findCheck(report, "ovs-bridge"); c.Status != nodecheck.Fail || !strings.Contains(c.Fix, "add-br "+env.OVSBridge) {
		t.Errorf("report's ovs-bridge check %+v, want a failure whose fix adds the bridge", c)
	}

	mustApply(t, workload())
	waitFailedScheduling(t)
	restore()
	waitNodeLabels(t, "the vhost-user label back with the bridge", func(l map[string]string) bool { return hasAll(l, stackNodeLabels) })
	p := waitAppPod(t, "")
	t.Logf("pod %s scheduled and Ready once the bridge was back", p.Name)
	if _, err := env.Kubectl("delete", "deployment", appName, "-n", injectedNS, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
	waitPodResourcesGone(t, p)
}

func hasAll(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// waitNodeLabels polls the node until its labels satisfy ok and returns its report then.
func waitNodeLabels(t *testing.T, what string, ok func(map[string]string) bool) *nodecheck.Report {
	t.Helper()
	var report *nodecheck.Report
	err := framework.Poll(what, 3*time.Minute, time.Second, func() (bool, string, error) {
		n := &corev1.Node{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: env.NodeName}, n); err != nil {
			return false, err.Error(), nil
		}
		r, err := nodecheck.ParseReport(n.Annotations[fstackv1.NodeReportAnnotation])
		if err != nil {
			return false, err.Error(), nil
		}
		report = r
		return ok(n.Labels) && hasAll(n.Labels, r.Labels), fmt.Sprintf("labels %v, report %+v", n.Labels, r.Failed()), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return report
}

func findCheck(r *nodecheck.Report, name string) nodecheck.Check {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return nodecheck.Check{}
}

// waitFailedScheduling: the app's pod is Pending, unbound, with a FailedScheduling event naming
// the node affinity.
func waitFailedScheduling(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	err := framework.Poll("the app pod Pending with FailedScheduling naming the node affinity", 3*time.Minute, time.Second, func() (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(injectedNS), client.MatchingLabels{"app": appName}); err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprintf("pods: %v (%d)", err, len(pods.Items)), nil
		}
		p := &pods.Items[0]
		if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
			return false, "", fmt.Errorf("pod %s was scheduled onto %s without the bridge: %s", p.Name, p.Spec.NodeName, framework.PodSummary(p))
		}
		evs, err := env.Clientset.CoreV1().Events(injectedNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedScheduling" && strings.Contains(e.Message, "node affinity") {
				t.Logf("pod %s: %s: %s", p.Name, e.Reason, e.Message)
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events, none FailedScheduling naming node affinity", len(evs.Items)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
