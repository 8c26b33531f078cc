package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/nodetest"
)

const (
	serviceName  = "e2e-fstack-svc"
	clientPod    = "e2e-svc-client"
	synAttempts  = 20
	rolloutStack = "e2e-rollout"
	rolloutApp   = "e2e-rollout-app"
	rolloutSvc   = "e2e-rollout-svc"
)

// stackService is a Service without a selector that opts in to the stack's served addresses.
func stackService(name, stack string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: injectedNS, Annotations: map[string]string{"kubefstack.io/stack": stack}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP,
			TargetPort: intstr.FromInt32(80)}}},
	}
}

// sliceEndpoint is what a check reads of one endpoint of the operator's slices.
type sliceEndpoint struct {
	addr, pod                   string
	ready, serving, terminating bool
}

func serviceEndpoints(svc string) ([]sliceEndpoint, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(injectedNS), client.MatchingLabels{
		discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.kubefstack.io"}); err != nil {
		return nil, err
	}
	var out []sliceEndpoint
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			ep := sliceEndpoint{addr: e.Addresses[0]}
			if e.TargetRef != nil {
				ep.pod = e.TargetRef.Name
			}
			b := func(p *bool) bool { return p != nil && *p }
			ep.ready, ep.serving, ep.terminating = b(e.Conditions.Ready), b(e.Conditions.Serving), b(e.Conditions.Terminating)
			out = append(out, ep)
		}
	}
	return out, nil
}

// waitSlice waits until the suite's Service's slices hold exactly want.
func waitSlice(t *testing.T, what string, want ...sliceEndpoint) {
	svc := serviceName
	t.Helper()
	err := framework.Poll("EndpointSlice of "+svc+": "+what, 30*time.Second, 200*time.Millisecond, func() (bool, string, error) {
		got, err := serviceEndpoints(svc)
		if err != nil {
			return false, "", err
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("%+v", got), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkServiceReachesStack: a selector-less Service annotated kubefstack.io/stack gets the
// operator's EndpointSlice with the pod's served address; the endpoint follows the pod's
// readiness; a kernel client pod's TCP to the ClusterIP reaches the stand-in's NIC (its RX
// counter grows by at least the SYNs sent: testpmd answers no TCP, so the proof is the packets
// arriving at F-Stack's port through kube-proxy and the node's sender on br-fstack).
func checkServiceReachesStack(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	ctx := context.Background()
	mustApply(t, fixtures.YAML(stackService(serviceName, stackName)))
	waitSlice(t, "the Ready pod", sliceEndpoint{addr: servedAddr(t, pod), pod: pod.Name, ready: true, serving: true})

	// Unready (the workload's readiness probe reads /tmp/attach.rc), then ready again.
	execIn(t, pod, appCont, "sh", "-c", "cp /tmp/attach.rc /tmp/attach.rc.ok && echo 1 >/tmp/attach.rc")
	waitSlice(t, "the unready pod", sliceEndpoint{addr: servedAddr(t, pod), pod: pod.Name})
	execIn(t, pod, appCont, "sh", "-c", "cp /tmp/attach.rc.ok /tmp/attach.rc")
	waitSlice(t, "the pod ready again", sliceEndpoint{addr: servedAddr(t, pod), pod: pod.Name, ready: true, serving: true})

	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: injectedNS, Name: serviceName}, svc); err != nil {
		t.Fatal(err)
	}
	before := rxPackets(t, pod)
	c := fixtures.Pod(clientPod, fixtures.WithNamespace(plainNS), fixtures.WithContainer(corev1.Container{
		Name: "client", Image: env.StandinImg, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"bash", "-c", fmt.Sprintf(`for i in $(seq %d); do timeout 1 bash -c 'exec 3<>/dev/tcp/%s/80' || true; done`,
			synAttempts, svc.Spec.ClusterIP)},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("64Mi")}},
	}))
	c.Spec.RestartPolicy = corev1.RestartPolicyNever
	mustApply(t, fixtures.YAML(c))
	err := framework.Poll("the client pod done", 2*time.Minute, time.Second, func() (bool, string, error) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: plainNS, Name: clientPod}, p); err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, framework.PodSummary(p), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after := rxPackets(t, pod)
	t.Logf("the dataplane's port 0 received %d packets while the client made %d TCP connection attempts to %s:80", after-before, synAttempts, svc.Spec.ClusterIP)
	if after-before < synAttempts {
		t.Errorf("the dataplane's RX packets grew by %d, want at least %d (one SYN per attempt): kube-proxy did not lead the ClusterIP to the served address", after-before, synAttempts)
	}
	_, _ = env.Kubectl("delete", "pod", clientPod, "-n", plainNS, "--ignore-not-found", "--wait=false")

	// Deleted: terminating while it drains, then gone; the Deployment's replacement takes its
	// place (the next address of the pool while the old pod drains).
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	err = framework.Poll("the deleted pod's endpoint terminating or gone", 30*time.Second, 200*time.Millisecond, func() (bool, string, error) {
		got, err := serviceEndpoints(serviceName)
		for _, e := range got {
			if e.pod == pod.Name && (e.ready || !e.terminating) {
				return false, fmt.Sprintf("%+v", got), err
			}
		}
		return true, "", err
	})
	if err != nil {
		t.Fatal(err)
	}
	next := waitAppPod(t, string(pod.UID))
	waitSlice(t, "the replacement pod only", sliceEndpoint{addr: servedAddr(t, next), pod: next.Name, ready: true, serving: true})
	if _, err := env.Kubectl("delete", "service", serviceName, "-n", injectedNS, "--wait=true"); err != nil {
		t.Fatal(err)
	}
	waitSlice(t, "none once the Service is gone")
	return next
}

// rxPackets reads the dataplane's fstack_nic_rx_packets_total of port 0 from its metrics.
func rxPackets(t *testing.T, p *corev1.Pod) int64 {
	t.Helper()
	cur := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
		t.Fatal(err)
	}
	n, err := framework.NICRxPackets(cur.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rolloutManifests: a stack whose pods take their own address from a pool, with the lab CPU
// policy (LAB ONLY: the local node has one exclusive CPU, and a rolling update's surge pod needs
// a dataplane beside the old ones) and a 5 s drain; a Deployment of 2 replicas that rolls with
// maxUnavailable 0; and a selector-less Service for it.
func rolloutManifests() string {
	stack := fmt.Sprintf(`apiVersion: kubefstack.io/v1alpha1
kind: StackInstance
metadata: {name: %s, namespace: %s}
spec:
  processes: 1
  drainSeconds: 5
  dpdk: {cpuPolicy: Shared}
  ports:
  - name: data
    attachment: %s
    device: {vhostUser: {queues: 1}}
    ipv4: {from: Pool, pool: {ranges: ["10.99.0.30-10.99.0.39"], prefixLength: 24}, gateway: 10.99.0.1}
  dataplane: {hugePages: {amount: %s}}
`, rolloutStack, injectedNS, env.Attachment, framework.StackHugePages)
	d := fixtures.Deployment(rolloutApp, fixtures.WithNamespace(injectedNS), fixtures.WithStackLabel(rolloutStack),
		fixtures.WithAnnotation("k8s.v1.cni.cncf.io/networks", env.Networks),
		fixtures.WithContainer(corev1.Container{Name: appCont, Image: env.StandinImg, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sleep", "infinity"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("64Mi")}}}))
	two, zero, one := int32(2), intstr.FromInt32(0), intstr.FromInt32(1)
	d.Spec.Replicas = &two
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &one}}
	return stack + "---\n" + fixtures.YAML(d, stackService(rolloutSvc, rolloutStack))
}

// checkRolloutLosesNothing: a rolling update (an annotation on the template) of a 2-replica
// Deployment with maxUnavailable 0, while a client on the data network pings, every 200 ms,
// each endpoint the Service's slices list as ready at that moment, as kube-proxy would send new
// connections to it. Every such ping is answered (the drain: a deleted pod leaves the ready set
// at once and keeps serving for spec.drainSeconds before its app and dataplane stop), and at no
// moment is the ready set empty (the surge pod is Ready and in the slice before an old pod
// leaves). The stand-in answers ping only: this proves the endpoints' timing against the
// dataplanes' lifetimes; TCP requests through a load generator are checked by hand on real
// F-Stack.
func checkRolloutLosesNothing(t *testing.T) {
	mustApply(t, rolloutManifests())
	if out, err := env.Kubectl("rollout", "status", "deployment/"+rolloutApp, "-n", injectedNS, "--timeout=5m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	err := framework.Poll("2 ready endpoints", time.Minute, 200*time.Millisecond, func() (bool, string, error) {
		got, err := serviceEndpoints(rolloutSvc)
		n := 0
		for _, e := range got {
			if e.ready {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%+v", got), err
	})
	if err != nil {
		t.Fatal(err)
	}
	peer, err := nodetest.AttachPeer(env.Vsctl, env.OVSNetns, env.OVSBridge, "e2e-rollout-peer", "e2er", "10.99.0.98/24")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	first, _ := serviceEndpoints(rolloutSvc)
	for _, e := range first {
		if _, err := peer.Ping(e.addr, 5); err != nil {
			t.Fatalf("endpoint %s before the rollout: %v", e.addr, err)
		}
	}

	var mu sync.Mutex
	var sent, failed, empty, drainingSent, drainingFailed int
	var failures []string
	seen := map[string]bool{}
	stop := make(chan struct{})
	done := make(chan struct{})
	ping := func(addr string) bool {
		_, err := nodetest.Run("ip", "netns", "exec", peer.Netns, "ping", "-c", "1", "-W", "1", addr)
		return err == nil
	}
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			eps, err := serviceEndpoints(rolloutSvc)
			if err != nil {
				continue
			}
			ready := 0
			for _, e := range eps {
				switch {
				case e.ready:
					ready++
					ok := ping(e.addr)
					mu.Lock()
					sent++
					seen[e.pod] = true
					if !ok {
						failed++
						failures = append(failures, fmt.Sprintf("%s (%s) at %s", e.addr, e.pod, time.Now().Format(time.RFC3339Nano)))
					}
					mu.Unlock()
				case e.serving && e.terminating:
					ok := ping(e.addr)
					mu.Lock()
					drainingSent++
					if !ok {
						drainingFailed++
					}
					mu.Unlock()
				}
			}
			if ready == 0 {
				mu.Lock()
				empty++
				mu.Unlock()
			}
		}
	}()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"e2e.kubefstack.io/rollout":"%d"}}}}}`, time.Now().UnixNano())
	if out, err := env.Kubectl("patch", "deployment", rolloutApp, "-n", injectedNS, "--type=merge", "-p", patch); err != nil {
		close(stop)
		<-done
		t.Fatalf("%v\n%s", err, out)
	}
	out, rerr := env.Kubectl("rollout", "status", "deployment/"+rolloutApp, "-n", injectedNS, "--timeout=5m")
	// The old pods' drain and stop after the rollout reports done.
	time.Sleep(10 * time.Second)
	close(stop)
	<-done
	if rerr != nil {
		t.Fatalf("%v\n%s", rerr, out)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("rollout: %d pings to ready endpoints, %d failed; %d to draining (terminating, serving) endpoints, %d failed; %d samples with no ready endpoint; pods seen ready: %v",
		sent, failed, drainingSent, drainingFailed, empty, seen)
	if failed > 0 {
		t.Errorf("%d pings to endpoints the slices listed as ready were not answered: %v", failed, failures)
	}
	if empty > 0 {
		t.Errorf("%d samples saw no ready endpoint: maxUnavailable 0 and the surge pod should keep one ready throughout", empty)
	}
	if len(seen) < 4 || sent < 20 {
		t.Errorf("the client saw %d pods ready in %d pings: want the 2 old and the 2 new, and a busy client", len(seen), sent)
	}
	for _, obj := range []string{"deployment/" + rolloutApp, "service/" + rolloutSvc} {
		if out, err := env.Kubectl("delete", obj, "-n", injectedNS, "--ignore-not-found", "--wait=true", "--timeout=120s"); err != nil {
			t.Logf("cleanup: %v\n%s", err, out)
		}
	}
	_, _ = env.Kubectl("delete", "stackinstance", rolloutStack, "-n", injectedNS, "--ignore-not-found", "--wait=true")
}
