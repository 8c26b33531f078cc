package multinode

import (
	"fmt"
	"testing"
	"time"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
)

// manifests: the stack (its pods take addresses from one pool on the data network that joins
// the workers; a 5 s drain), a Deployment of two replicas spread one per worker (tainted nodes,
// a cordoned or lost one, do not count in the spread, and a lost node's pods are evicted after
// 5 s instead of 5 min), a PodDisruptionBudget that keeps one serving through a drain, and a
// NodePort Service without a selector whose endpoints are the stack's served addresses.
func manifests(standin string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s, labels: {kubefstack.io/injection: enabled, pod-security.kubernetes.io/enforce: baseline}}
---
apiVersion: kubefstack.io/v1alpha1
kind: StackInstance
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  processes: 1
  drainSeconds: 5
  dpdk: {cpuPolicy: Shared}
  ports:
  - name: data
    attachment: eth0
    device: {vhostUser: {queues: 1}}
    ipv4: {from: Pool, pool: {ranges: ["%[6]s-%[7]s"], prefixLength: 24}, gateway: 10.98.0.1}
  dataplane: {hugePages: {amount: %[5]s}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[3]s, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: %[3]s}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
  template:
    metadata:
      labels: {app: %[3]s, kubefstack.io/stack: %[2]s}
    spec:
      terminationGracePeriodSeconds: 10
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        nodeTaintsPolicy: Honor
        labelSelector: {matchLabels: {app: %[3]s}}
        # Only the new ReplicaSet's pods count, so a rollout ends one per worker again.
        matchLabelKeys: [pod-template-hash]
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
      containers:
      - name: app
        image: %[4]s
        imagePullPolicy: IfNotPresent
        command: [sleep, infinity]
        resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 64Mi}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: %[3]s, namespace: %[1]s}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: %[3]s}}
---
apiVersion: v1
kind: Service
metadata: {name: %[8]s, namespace: %[1]s, annotations: {kubefstack.io/stack: %[2]s}}
spec:
  type: NodePort
  ports: [{name: http, port: 80, targetPort: 80, protocol: TCP}]
`, ns, stack, app, standin, framework.StackHugePages, poolFrom, poolTo, svcName)
}

// mustSetup applies the suite's stack once and waits for its two replicas; every test calls it,
// so each can also run alone (go test -run).
func mustSetup(t *testing.T) *cluster {
	t.Helper()
	e := mustEnv(t)
	setupMu.Lock()
	defer setupMu.Unlock()
	if setupErr != nil {
		t.Fatalf("setup failed earlier: %v", setupErr)
	}
	if !setupOK {
		e.apply(t, manifests(e.standin))
		if _, err := e.kc("-n", ns, "wait", "--for=condition=Valid", "stackinstance/"+stack, "--timeout=60s"); err != nil {
			setupErr = err
			t.Fatal(err)
		}
		setupOK = true
	}
	e.waitReady(t, app, 2, 4*time.Minute)
	return e
}

// TestMultiNode runs the steps in order, each on what the one before left: the disruptive ones
// last. `go test -run TestMultiNode/Drain` runs one.
func TestMultiNode(t *testing.T) {
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"SpreadOverWorkers", testStackSpreadsOverWorkers},
		{"ServiceFromEveryNode", testServiceFromEveryNode},
		{"NodeWithoutSwitch", testNodeWithoutSwitchGetsNoStackPod},
		{"Drain", testDrainLosesNothing},
		{"CNIDaemonSetUpgrade", testCNIDaemonSetUpgradeUnderLoad},
		{"WorkerLost", testWorkerLost},
	} {
		t.Run(step.name, step.run)
	}
}
