package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

const leaseName = framework.OperatorLease

// creates made in a row before the kill, and at least after it: the loop must be running when
// the replica goes, and go on through the replacement's start.
const createsBeforeKill, createsAfterKill = 5, 20

// checkReplicaKilled deletes one operator replica (the leader, so the controller fails over too),
// as a node drain or a rollout does, while pods naming the stack are created back to back: the
// webhooks have failurePolicy Fail, so every create that reached no replica would be refused.
// None may be, and each must come back injected. The delete takes the pod's own grace period: on
// SIGTERM the operator drains (--shutdown-delay, the chart's operator.shutdownDelaySeconds),
// unready and answering every call, each answer ending its kept-alive connection, while the
// Service and the API server's connections move to the other replica. A replica killed
// outright (grace 0, SIGKILL) fails the one call it was answering with EOF, which the API server
// does not retry: measured in this step with grace 0, 1 of 214 creates was refused that way
// (docs/install.md, "The operator's replicas"). The creates are server-side dry runs: they pass
// through every admission webhook like a real create and store nothing (the node's one
// exclusive CPU is the running app's).
func checkReplicaKilled(t *testing.T) {
	ctx := context.Background()
	deploy := operatorDeployment(t)
	if *deploy.Spec.Replicas < 2 {
		t.Fatalf("the operator runs %d replica(s): killing one leaves no webhook server (chart value operator.replicas)", *deploy.Spec.Replicas)
	}
	if out, err := env.Kubectl("rollout", "status", "-n", env.Namespace, "deployment/"+deploy.Name, "--timeout=180s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	victim := leaderPod(t, deploy.Spec.Selector.MatchLabels)

	loop := startCreateLoop(ctx)
	defer loop.stop()
	loop.waitFor(t, createsBeforeKill)
	if err := env.Clientset.CoreV1().Pods(env.Namespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete operator pod %s: %v", victim, err)
	}
	killedAt := loop.count()
	t.Logf("deleted operator pod %s (its grace period) after %d creates", victim, killedAt)
	if out, err := env.Kubectl("rollout", "status", "-n", env.Namespace, "deployment/"+deploy.Name, "--timeout=180s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	loop.waitFor(t, killedAt+createsAfterKill)
	total, refused := loop.stop()
	if len(refused) > 0 {
		t.Fatalf("%d of %d creates refused or not injected while one operator replica was killed; first: %s",
			len(refused), total, refused[0])
	}
	t.Logf("%d creates (%d after the kill), none refused; leader now %s", total, total-killedAt, leaderHolder(t))
}

// leaderPod is the operator pod holding the leader Lease: its identity starts with the pod's
// hostname, which is the pod's name.
func leaderPod(t *testing.T, selector map[string]string) string {
	t.Helper()
	holder := leaderHolder(t)
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(env.Namespace), client.MatchingLabels(selector)); err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, p := range pods.Items {
		if podReady(&p) {
			ready++
		}
	}
	if ready < 2 {
		t.Fatalf("%d operator pods ready, want at least 2 before killing one", ready)
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(holder, p.Name+"_") {
			return p.Name
		}
	}
	t.Fatalf("no operator pod holds the Lease %s (holder %q)", leaseName, holder)
	return ""
}

func leaderHolder(t *testing.T) string {
	t.Helper()
	holder, err := framework.LeaseHolder(context.Background(), env.Client, env.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return holder
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return p.DeletionTimestamp == nil && c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// createLoop creates a pod naming the stack (dry run) again and again until stopped.
type createLoop struct {
	mu      sync.Mutex
	n       int
	refused []string
	done    chan struct{}
	exited  chan struct{}
	once    sync.Once
}

func startCreateLoop(ctx context.Context) *createLoop {
	l := &createLoop{done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(l.exited)
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			default:
			}
			p := boundPod("ha-probe")
			err := env.Client.Create(ctx, p, client.DryRunAll)
			if err == nil && container(p, podcontract.DataplaneContainer) == nil {
				err = fmt.Errorf("admitted without injection: %s", framework.PodSummary(p))
			}
			l.mu.Lock()
			l.n++
			if err != nil {
				l.refused = append(l.refused, fmt.Sprintf("create %d at %s: %v", i, time.Now().UTC().Format("15:04:05.000"), err))
			}
			l.mu.Unlock()
			// A few dozen a second: enough that the second or so the proxies take to drop the
			// killed replica sees many creates, without loading the two-CPU node's API server.
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return l
}

func (l *createLoop) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// waitFor waits until n creates were made.
func (l *createLoop) waitFor(t *testing.T, n int) {
	t.Helper()
	err := framework.Poll(fmt.Sprintf("%d pod creates", n), 2*time.Minute, 100*time.Millisecond, func() (bool, string, error) {
		c := l.count()
		return c >= n, fmt.Sprintf("%d creates", c), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stop ends the loop and returns how many creates it made and the refused ones.
func (l *createLoop) stop() (int, []string) {
	l.once.Do(func() { close(l.done) })
	<-l.exited
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.refused
}
