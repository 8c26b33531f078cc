package multinode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// spreadAgain rolls the Deployment so that its replicas are one per worker again.
func (e *cluster) spreadAgain(t *testing.T) {
	t.Helper()
	e.mustKubectl(t, "-n", ns, "rollout", "restart", "deployment/"+app)
	e.mustKubectl(t, "-n", ns, "rollout", "status", "deployment/"+app, "--timeout=5m")
	pods := e.waitReady(t, app, 2, 3*time.Minute)
	if pods[0].Spec.NodeName == pods[1].Spec.NodeName {
		t.Fatalf("after the rollout both replicas run on %s", pods[0].Spec.NodeName)
	}
}

// leftBehind says what a node keeps of the given pods: OVS ports (by the pod UID fstack-cni
// records on each), socket directories (named by pod UID) and AddressClaims bound to them.
func (e *cluster) leftBehind(t *testing.T, node string, gone map[string]string) []string {
	t.Helper()
	var left []string
	out, err := e.onNode(node, "ovs-vsctl", "--timeout=10", "--columns=name,external_ids", "--format=csv", "--no-headings",
		"find", "Interface", "type=dpdkvhostuserclient")
	if err != nil {
		t.Fatal(err)
	}
	for uid, name := range gone {
		if strings.Contains(out, podcontract.OVSIDPodUID+"=\""+uid) || strings.Contains(out, podcontract.OVSIDPodUID+"="+uid) {
			left = append(left, fmt.Sprintf("the OVS port of %s on %s", name, node))
		}
		for _, d := range e.socketDirs(t, node) {
			if d == uid {
				left = append(left, fmt.Sprintf("the socket directory of %s on %s", name, node))
			}
		}
	}
	for _, c := range e.claims(t) {
		if name, ok := gone[c.Spec.PodUID]; ok {
			left = append(left, fmt.Sprintf("AddressClaim %s of %s", c.Name, name))
		}
	}
	return left
}

func uidsOn(pods []corev1.Pod, node string) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		if p.Spec.NodeName == node {
			out[string(p.UID)] = p.Name
		}
	}
	return out
}

// `kubectl drain` of a worker under load through the Service: the replica there moves to the
// other worker, no ping to a ready endpoint goes unanswered, and the drained node keeps no OVS
// port, socket directory or AddressClaim of the pod that left.
func testDrainLosesNothing(t *testing.T) {
	e := mustSetup(t)
	_, workers := e.nodes(t)
	node := workers[0]
	before := e.waitReady(t, app, 2, 2*time.Minute)
	gone := uidsOn(before, node)
	if len(gone) != 1 {
		t.Fatalf("want one replica on %s before the drain, have %v", node, gone)
	}
	defer func() { _, _ = e.kc("uncordon", node) }()
	l := e.startLoad(t)
	out, err := e.kc("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=4m")
	if err != nil {
		l.finish(t, "drain")
		t.Fatalf("%v\n%s", err, out)
	}
	after := e.waitReady(t, app, 2, 3*time.Minute)
	// The evicted pod drains (spec.drainSeconds) after the drain returns.
	time.Sleep(10 * time.Second)
	l.finish(t, "drain of "+node)
	for _, p := range after {
		if p.Spec.NodeName == node {
			t.Errorf("pod %s runs on the drained node %s", p.Name, node)
		}
	}
	err = framework.Poll("nothing of the drained pod left on "+node, time.Minute, time.Second, func() (bool, string, error) {
		left := e.leftBehind(t, node, gone)
		return len(left) == 0, strings.Join(left, "; "), nil
	})
	if err != nil {
		t.Error(err)
	}
	e.mustKubectl(t, "uncordon", node)
	e.spreadAgain(t)
}

// The CNI installer and node agent DaemonSet rolled to a new image, node by node, under load:
// the data path does not depend on it (no ping to a ready endpoint unanswered), and afterwards
// every worker still binds each of its stack ports' addresses in the anti-spoofing rules.
func testCNIDaemonSetUpgradeUnderLoad(t *testing.T) {
	e := mustSetup(t)
	controlPlane, workers := e.nodes(t)
	ds := &appsv1.DaemonSet{}
	name := e.release + "-cni"
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.opNS, Name: name}, ds); err != nil {
		t.Fatal(err)
	}
	if s := ds.Spec.UpdateStrategy; s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 1 {
		t.Fatalf("DaemonSet %s rolls %+v, want RollingUpdate with maxUnavailable 1 (node by node)", name, s)
	}
	old := ds.Spec.Template.Spec.Containers[0].Image
	repo := old[:strings.LastIndex(old, ":")]
	next := repo + ":e2e-upgrade"
	// The "new" image is the same archive under another tag: a new image to the kubelet, which
	// replaces every pod, and nothing to pull.
	for _, n := range append([]string{controlPlane}, workers...) {
		if out, err := e.onNode(n, "ctr", "-n", "k8s.io", "images", "tag", "--force", old, next); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	l := e.startLoad(t)
	e.mustKubectl(t, "-n", e.opNS, "set", "image", "daemonset/"+name, "*="+next)
	out, err := e.kc("-n", e.opNS, "rollout", "status", "daemonset/"+name, "--timeout=5m")
	time.Sleep(5 * time.Second)
	l.finish(t, "DaemonSet upgrade")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	defer func() {
		_, _ = e.kc("-n", e.opNS, "set", "image", "daemonset/"+name, "*="+old)
		_, _ = e.kc("-n", e.opNS, "rollout", "status", "daemonset/"+name, "--timeout=5m")
	}()
	pods := &corev1.PodList{}
	if err := e.c.List(context.Background(), pods, client.InNamespace(e.opNS), client.MatchingLabels(ds.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.Image != next {
				t.Errorf("pod %s on %s container %s runs %s after the rollout, want %s", p.Name, p.Spec.NodeName, c.Name, c.Image, next)
			}
		}
	}
	for _, p := range e.waitReady(t, app, 2, time.Minute) {
		p := p
		a := servedAddr(t, &p)
		flows, err := e.onNode(p.Spec.NodeName, "ovs-ofctl", "dump-flows", "br-fstack")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(flows, "arp_spa="+a+",") && !strings.Contains(flows, "arp_spa="+a+" ") {
			t.Errorf("after the upgrade %s's bridge has no anti-spoofing rule binding %s (pod %s):\n%s", p.Spec.NodeName, a, p.Name, flows)
		}
	}
}

// A worker lost (its node container stopped), the one that hosts the operator's leader: the
// other operator replica takes the lease and serves the webhook, the evicted replica's
// replacement is admitted injected and serves on the other worker with a new address bound by
// the new leader, no pod of the stack is admitted uninjected, the lost pods' AddressClaims go
// once the node is declared out of service, and when the node comes back it keeps nothing of
// them.
func testWorkerLost(t *testing.T) {
	e := mustSetup(t)
	_, workers := e.nodes(t)
	e.spreadOperator(t)
	before := e.waitReady(t, app, 2, 2*time.Minute)
	leaderPod, node := e.leader(t)
	found := false
	for _, w := range workers {
		found = found || w == node
	}
	if !found {
		t.Fatalf("the operator's leader %s runs on %s, not on a worker %v", leaderPod, node, workers)
	}
	gone := uidsOn(before, node)
	lostAddrs, existed := map[string]bool{}, map[string]bool{}
	for i := range before {
		existed[string(before[i].UID)] = true
		if before[i].Spec.NodeName == node {
			lostAddrs[servedAddr(t, &before[i])] = true
		}
	}
	t.Logf("stopping %s, which runs the operator's leader %s and %v", node, leaderPod, gone)
	if out, err := run(e.engine, "stop", "-t", "0", node); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	defer func() {
		_, _ = run(e.engine, "start", node)
		_, _ = e.kc("taint", "nodes", node, "node.kubernetes.io/out-of-service-")
	}()

	var after []corev1.Pod
	err := framework.Poll("a replacement Ready on the other worker", 5*time.Minute, 2*time.Second, func() (bool, string, error) {
		pods := e.appPods(t, app)
		var ready []corev1.Pod
		var sum []string
		for i := range pods {
			sum = append(sum, framework.PodSummary(&pods[i])+" on "+pods[i].Spec.NodeName)
			if pods[i].Spec.NodeName != node && framework.PodReady(&pods[i]) {
				ready = append(ready, pods[i])
			}
		}
		after = ready
		return len(ready) == 2, strings.Join(sum, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if holder := e.leaseHolder(t); strings.HasPrefix(holder, leaderPod+"_") {
		t.Errorf("the lost node's operator %s still holds the lease", leaderPod)
	}
	claims := e.claims(t)
	for i := range after {
		p := &after[i]
		if !injected(p) {
			t.Errorf("pod %s was admitted without the dataplane", p.Name)
		}
		if existed[string(p.UID)] {
			continue // the replica the other worker ran all along
		}
		a := servedAddr(t, p)
		if lostAddrs[a] {
			t.Errorf("replacement %s serves %s, an address the lost pod still held", p.Name, a)
		}
		bound := false
		for _, c := range claims {
			bound = bound || (c.Spec.Address == a && c.Spec.PodUID == string(p.UID))
		}
		if !bound {
			t.Errorf("no AddressClaim binds %s to the replacement %s", a, p.Name)
		}
		if !ping(a) {
			t.Errorf("replacement %s on %s does not answer at %s", p.Name, p.Spec.NodeName, a)
		}
		t.Logf("replacement %s on %s serves %s", p.Name, p.Spec.NodeName, a)
	}

	// The lost pods stay Terminating while their node is unreachable; declared out of service
	// (non-graceful node shutdown), they are deleted and their claims go with them.
	e.mustKubectl(t, "taint", "nodes", node, "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute", "--overwrite")
	err = framework.Poll("the lost pods and their AddressClaims gone", 3*time.Minute, 2*time.Second, func() (bool, string, error) {
		var left []string
		for uid, name := range gone {
			p := &corev1.Pod{}
			if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err == nil && string(p.UID) == uid {
				left = append(left, "pod "+name)
			}
		}
		for _, c := range e.claims(t) {
			if name, ok := gone[c.Spec.PodUID]; ok {
				left = append(left, "AddressClaim "+c.Name+" of "+name)
			}
		}
		return len(left) == 0, strings.Join(left, "; "), nil
	})
	if err != nil {
		t.Error(err)
	}

	// The node comes back: its uplink and routes are put back as up.sh makes them.
	if out, err := run(e.kindUp); err != nil {
		t.Fatalf("bringing %s back: %v\n%s", node, err, out)
	}
	e.mustKubectl(t, "taint", "nodes", node, "node.kubernetes.io/out-of-service-")
	err = framework.Poll(node+" keeps nothing of the lost pods", 3*time.Minute, 2*time.Second, func() (bool, string, error) {
		left := e.leftBehind(t, node, gone)
		return len(left) == 0, strings.Join(left, "; "), nil
	})
	if err != nil {
		t.Error(err)
	}
}

func injected(p *corev1.Pod) bool {
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == podcontract.DataplaneContainer {
			return true
		}
	}
	return false
}

const leaseName = framework.OperatorLease

func (e *cluster) leaseHolder(t *testing.T) string {
	t.Helper()
	holder, err := framework.LeaseHolder(context.Background(), e.c, e.opNS)
	if err != nil {
		t.Fatal(err)
	}
	return holder
}

// leader is the operator pod holding the lease (its identity starts with the pod's name) and
// its node.
// A lease of a replica that is gone (a rollout) is taken by another once it expires.
func (e *cluster) leader(t *testing.T) (pod, node string) {
	t.Helper()
	err := framework.Poll("a running operator replica holding the lease "+leaseName, time.Minute, time.Second, func() (bool, string, error) {
		holder := e.leaseHolder(t)
		pods := &corev1.PodList{}
		if err := e.c.List(context.Background(), pods, client.InNamespace(e.opNS)); err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(holder, p.Name+"_") && p.DeletionTimestamp == nil && framework.PodReady(&p) {
				pod, node = p.Name, p.Spec.NodeName
				return true, "", nil
			}
		}
		return false, "holder " + holder, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pod, node
}

// spreadOperator makes sure the operator's replicas run on different nodes. Its spread is
// ScheduleAnyway (a one-node cluster runs them all), so a drain earlier in the suite may have
// left both on one worker, as it would a platform's: a rollout spreads them again, which is
// what docs/install.md has operators do after maintenance.
func (e *cluster) spreadOperator(t *testing.T) {
	t.Helper()
	deploy := e.release + "-operator"
	nodes := func() map[string]int {
		d := &appsv1.Deployment{}
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.opNS, Name: deploy}, d); err != nil {
			t.Fatal(err)
		}
		pods := &corev1.PodList{}
		if err := e.c.List(context.Background(), pods, client.InNamespace(e.opNS), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil && framework.PodReady(&pods.Items[i]) {
				out[pods.Items[i].Spec.NodeName]++
			}
		}
		return out
	}
	if n := nodes(); len(n) >= 2 {
		return
	}
	e.mustKubectl(t, "-n", e.opNS, "rollout", "restart", "deployment/"+deploy)
	e.mustKubectl(t, "-n", e.opNS, "rollout", "status", "deployment/"+deploy, "--timeout=3m")
	time.Sleep(5 * time.Second) // the old replicas' terminations
	if n := nodes(); len(n) < 2 {
		t.Fatalf("the operator's replicas run on %v after a rollout: want two nodes", n)
	}
}
