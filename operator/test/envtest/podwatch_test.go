package envtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

// podEvents records, through the controller's test hook, each pod event that passed the pod
// watch's predicate (and so enqueued the pod's StackInstance), as namespace/name@resourceVersion.
var podEvents = &eventLog{seen: map[string]bool{}}

type eventLog struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (l *eventLog) record(o client.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[eventKey(o)] = true
}

func (l *eventLog) has(o client.Object) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[eventKey(o)]
}

func eventKey(o client.Object) string {
	return fmt.Sprintf("%s/%s@%s", o.GetNamespace(), o.GetName(), o.GetResourceVersion())
}

// An update of a bound pod that cannot move the counts (here an annotation of the user's) does
// not enqueue its StackInstance; the update after it, the dataplane turning ready, does. The
// informer delivers one pod's events in order, so once the second is seen the first would have
// been seen before it: no waiting on the absence of something.
func TestIrrelevantPodUpdateDoesNotReconcile(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "watched")
	testenv.CreateIfAbsent(t, k8s, si)
	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Name, pod.Labels[fsv1.StackLabel] = "watched-0", si.Name
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// It holds the sample's static address, which one pod of the cluster may hold.
	testenv.DeleteAtEnd(t, k8s, pod)
	waitStatus(t, si.Name, 1, 0, fsv1.ReasonPodsNotReady, "0 of 1 pods have a ready dataplane")

	irrelevant := pod.DeepCopy()
	irrelevant.Annotations["example.com/owner"] = "team-web"
	if err := k8s.Patch(ctx, irrelevant, client.MergeFrom(pod)); err != nil {
		t.Fatal(err)
	}
	fence := irrelevant.DeepCopy()
	fence.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, Ready: true, Image: "x", ImageID: "x"}}
	if err := k8s.Status().Update(ctx, fence); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if !podEvents.has(fence) {
			return fmt.Errorf("the dataplane-ready update (%s) has not enqueued the StackInstance", eventKey(fence))
		}
		return nil
	})
	if podEvents.has(irrelevant) {
		t.Fatalf("the annotation-only update %s enqueued StackInstance %s: the pod watch's predicate let it through", eventKey(irrelevant), si.Name)
	}
	if !podEvents.has(pod) {
		t.Fatalf("the pod's create (%s) did not enqueue its StackInstance", eventKey(pod))
	}
	waitStatus(t, si.Name, 1, 1, fsv1.ReasonAllPodsReady, "1 of 1 pods have a ready dataplane")
}
