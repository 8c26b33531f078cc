package multinode

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
)

const vhostLabel = "node.kubefstack.io/vhost-user"

func (e *cluster) nodeLabel(t *testing.T, node, key string) string {
	t.Helper()
	n := &corev1.Node{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	return n.Labels[key]
}

// events are the messages of the object's events with reason, oldest first.
func (e *cluster) events(t *testing.T, namespace, object, reason string) []string {
	t.Helper()
	list := &corev1.EventList{}
	if err := e.c.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == object && ev.Reason == reason {
			out = append(out, ev.Message)
		}
	}
	return out
}

// A worker whose switch is gone (its OVS-DPDK stopped) cannot run the stack: its node agent
// takes back node.kubefstack.io/vhost-user, a pod of the stack pinned to it stays Pending and
// its events say which requirement that node misses, and `kubectl fstack doctor` names the node
// and the fix. With the switch back the pod runs there, and the replica the node already ran
// serves again (its port comes back from OVSDB, its rules from the flow keeper).
func testNodeWithoutSwitchGetsNoStackPod(t *testing.T) {
	e := mustSetup(t)
	_, workers := e.nodes(t)
	node := workers[len(workers)-1]
	const pinned = "mn-pinned"
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if out, err := e.onNode(node, "systemctl", "start", "kube-fstack-ovs"); err != nil {
				t.Errorf("restarting OVS on %s: %v\n%s", node, err, out)
			}
		}
	}
	defer restore()
	defer func() { _, _ = e.kc("-n", ns, "delete", "deployment", pinned, "--ignore-not-found", "--wait=false") }()

	if out, err := e.onNode(node, "systemctl", "stop", "kube-fstack-ovs"); err != nil {
		t.Fatalf("stopping OVS on %s: %v\n%s", node, err, out)
	}
	err := framework.Poll(node+" loses "+vhostLabel, time.Minute, time.Second, func() (bool, string, error) {
		v := e.nodeLabel(t, node, vhostLabel)
		return v != "ready", vhostLabel + "=" + v, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata:
      labels: {app: %[1]s, kubefstack.io/stack: %[3]s}
    spec:
      terminationGracePeriodSeconds: 3
      nodeSelector: {kubernetes.io/hostname: %[4]s}
      containers:
      - name: app
        image: %[5]s
        imagePullPolicy: IfNotPresent
        command: [sleep, infinity]
        resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 64Mi}}
`, pinned, ns, stack, node, e.standin))
	var pod corev1.Pod
	err = framework.Poll("the pinned pod unschedulable, its events saying why", 2*time.Minute, time.Second, func() (bool, string, error) {
		pods := e.appPods(t, pinned)
		if len(pods) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods)), nil
		}
		pod = pods[0]
		if pod.Spec.NodeName != "" {
			return false, "", fmt.Errorf("pod %s was scheduled to %s, which has no switch", pod.Name, pod.Spec.NodeName)
		}
		why := e.events(t, ns, pod.Name, "NoNodeForStack")
		if len(why) == 0 {
			return false, fmt.Sprintf("FailedScheduling: %v", e.events(t, ns, pod.Name, "FailedScheduling")), nil
		}
		return strings.Contains(why[len(why)-1], node) && strings.Contains(why[len(why)-1], vhostLabel), why[len(why)-1], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := e.events(t, ns, pod.Name, "NoNodeForStack")
	t.Logf("pod %s: %s", pod.Name, msg[len(msg)-1])

	cmd := exec.Command(e.plugin, "doctor", "--kubeconfig", e.kubeconfig, node)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("kubectl fstack doctor %s exited %d, want 1 (a check a stack needs failed):\n%s", node, code, out)
	}
	if !strings.Contains(string(out), node) || !strings.Contains(string(out), "fix ") {
		t.Errorf("kubectl fstack doctor does not name %s and a fix:\n%s", node, out)
	}
	t.Logf("kubectl fstack doctor %s:\n%s", node, out)

	restore()
	if err := framework.Poll(node+" gets "+vhostLabel+" back", time.Minute, time.Second, func() (bool, string, error) {
		return e.nodeLabel(t, node, vhostLabel) == "ready", "", nil
	}); err != nil {
		t.Fatal(err)
	}
	got := e.waitReady(t, pinned, 1, 3*time.Minute)
	if got[0].Spec.NodeName != node {
		t.Errorf("pinned pod on %s, want %s", got[0].Spec.NodeName, node)
	}
	// The replica that ran on the node all along serves again.
	for _, p := range e.waitReady(t, app, 2, 2*time.Minute) {
		p := p
		a := servedAddr(t, &p)
		if err := framework.Poll(a+" answers again", time.Minute, time.Second, func() (bool, string, error) {
			return ping(a), "", nil
		}); err != nil {
			t.Errorf("pod %s on %s after its switch came back: %v", p.Name, p.Spec.NodeName, err)
		}
	}
	if out, err := e.kc("-n", ns, "delete", "deployment", pinned, "--wait=true"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
