package envtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/controller"
)

// sliceWait bounds how long the slices may take to follow a change: the controller acts on
// watch events, so seconds; the bound is generous for a loaded machine.
const sliceWait = 30 * time.Second

// stackService is a Service without a selector that opts in to StackInstance stack's addresses.
func stackService(name, stack string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: optedInNS, Name: name,
			Annotations: map[string]string{podcontract.ServiceStackAnnotation: stack}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")},
			{Name: "alt", Port: 8080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9090)}}},
	}
}

// endpointPod creates a pod bound to stack (the webhook injects it) with a named port http on 80
// and, as the scheduler would, a node.
func endpointPod(t *testing.T, name, stack string) *corev1.Pod {
	t.Helper()
	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Name, pod.Labels[fsv1.StackLabel], pod.Spec.NodeName = name, stack, "node-a"
	pod.Spec.Containers[0].Ports[0].Name = "http"
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// setPodReady writes the pod's Ready condition as the kubelet would (envtest runs none).
func setPodReady(t *testing.T, pod *corev1.Pod, ready bool) {
	t.Helper()
	ctx := context.Background()
	cur := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	cur.Status.Phase = corev1.PodRunning
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
}

// endpointState is what a test compares of an endpoint.
type endpointState struct {
	Addr, Pod, Node             string
	Ready, Serving, Terminating bool
}

// serviceSlices returns the operator's slices of the Service.
func serviceSlices(svc string) ([]discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	err := k8s.List(context.Background(), list, client.InNamespace(optedInNS), client.MatchingLabels{
		discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: controller.EndpointSliceManagedBy})
	return list.Items, err
}

// waitEndpoints waits until the Service's slices hold exactly want (IPv4), with the Service's
// ports resolved against the pod (http named 80, alt 9090) and the Service as their owner.
func waitEndpoints(t *testing.T, svc *corev1.Service, want ...endpointState) {
	t.Helper()
	testenv.Eventually(t, sliceWait, func() error {
		items, err := serviceSlices(svc.Name)
		if err != nil {
			return err
		}
		var got []endpointState
		for _, s := range items {
			if s.AddressType != discoveryv1.AddressTypeIPv4 || len(s.Ports) != 2 || *s.Ports[0].Port != 80 || *s.Ports[0].Name != "http" ||
				*s.Ports[1].Port != 9090 || *s.Ports[1].Name != "alt" {
				return fmt.Errorf("slice %s: address type %s, ports %v", s.Name, s.AddressType, s.Ports)
			}
			if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != svc.UID || s.OwnerReferences[0].Kind != "Service" {
				return fmt.Errorf("slice %s: owners %+v", s.Name, s.OwnerReferences)
			}
			for _, e := range s.Endpoints {
				got = append(got, endpointState{Addr: e.Addresses[0], Pod: e.TargetRef.Name, Node: *e.NodeName,
					Ready: *e.Conditions.Ready, Serving: *e.Conditions.Serving, Terminating: *e.Conditions.Terminating})
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("endpoints %+v, want %+v", got, want)
		}
		return nil
	})
}

// A selector-less Service annotated with a StackInstance gets an EndpointSlice with the bound
// pod's served address (the sample's static 10.99.0.10, not its kernel IP), the Service's ports
// (a named targetPort resolved against the app container), the pod's node and reference; the
// endpoint follows the pod's readiness, turns terminating (serving while still Ready) when the
// pod is deleted, and goes with the pod; removing the annotation, then deleting the Service,
// removes the slices.
func TestEndpointSlicesFollowThePods(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "eps")
	testenv.CreateIfAbsent(t, k8s, si)
	svc := stackService("eps", si.Name)
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	pod := endpointPod(t, "eps-a", si.Name)
	waitEndpoints(t, svc, endpointState{Addr: "10.99.0.10", Pod: pod.Name, Node: "node-a"})

	setPodReady(t, pod, true)
	waitEndpoints(t, svc, endpointState{Addr: "10.99.0.10", Pod: pod.Name, Node: "node-a", Ready: true, Serving: true})

	setPodReady(t, pod, false)
	waitEndpoints(t, svc, endpointState{Addr: "10.99.0.10", Pod: pod.Name, Node: "node-a"})

	// A pod on a node is deleted gracefully: the API server sets its deletion timestamp and
	// keeps it for the kubelet, which envtest does not run.
	setPodReady(t, pod, true)
	if err := k8s.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, svc, endpointState{Addr: "10.99.0.10", Pod: pod.Name, Node: "node-a", Serving: true, Terminating: true})
	// The kubelet's last word: gone.
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, svc)

	// Back with a new pod; then the annotation goes, and the slices with it.
	pod = endpointPod(t, "eps-b", si.Name)
	setPodReady(t, pod, true)
	waitEndpoints(t, svc, endpointState{Addr: "10.99.0.10", Pod: pod.Name, Node: "node-a", Ready: true, Serving: true})
	cur := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), cur); err != nil {
		t.Fatal(err)
	}
	delete(cur.Annotations, podcontract.ServiceStackAnnotation)
	if err := k8s.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, svc)

	// Opted in again, then deleted: envtest runs no garbage collector, so the controller itself
	// deletes the slices of a Service that is gone.
	cur.Annotations = map[string]string{podcontract.ServiceStackAnnotation: si.Name}
	if err := k8s.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, svc, endpointState{Addr: "10.99.0.10", Pod: pod.Name, Node: "node-a", Ready: true, Serving: true})
	if err := k8s.Delete(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, svc)
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// A Service with a selector and the annotation gets a Warning Event and no slice of ours:
// Kubernetes' own controller would publish the kernel IPs beside them.
func TestEndpointSlicesRefuseAServiceWithASelector(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "eps-sel")
	testenv.CreateIfAbsent(t, k8s, si)
	pod := endpointPod(t, "eps-sel-a", si.Name)
	setPodReady(t, pod, true)
	svc := stackService("eps-sel", si.Name)
	svc.Spec.Selector = map[string]string{"app": "web"}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, svc, corev1.EventTypeWarning, controller.EventSelectorIgnored,
		"the Service has a selector, so Kubernetes publishes the pods' kernel IPs, where F-Stack does not listen; remove spec.selector")
	// The same Service without a selector is published, so "nothing" above is not a slow controller.
	plain := stackService("eps-sel-plain", si.Name)
	if err := k8s.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, plain, endpointState{Addr: "10.99.0.10", Pod: pod.Name, Node: "node-a", Ready: true, Serving: true})
	if items, err := serviceSlices(svc.Name); err != nil || len(items) != 0 {
		t.Fatalf("slices of the Service with a selector: %v, %v", items, err)
	}
	for _, o := range []client.Object{svc, plain} {
		if err := k8s.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// Issue 38, the endpoint hijack (the CVE-2021-25740 class): the slices publish a pod's own
// kubefstack.io/addresses, which the pod's owner writes. In a namespace that never opted in, a
// Ready pod with the stack label annotated with a node's, a Service's and a neighbour's address,
// and a selector-less LoadBalancer Service naming its stack, get nothing published (and the
// Service an Event saying why); in an opted-in namespace a pod that opted out of injection with
// the same forged annotation and a forged Ready status is left out too, since no AddressClaim
// of it holds those addresses.
func TestForgedAddressesAreNotPublished(t *testing.T) {
	ctx := context.Background()
	const forged = "0=10.244.3.17,0=10.96.0.10,0=192.168.1.10"
	const outside = "never-opted-in"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: outside}}); err != nil {
		t.Fatal(err)
	}
	forgedPod := func(ns, name string, extra map[string]string) {
		ann := map[string]string{podcontract.AddressesAnnotation: forged}
		for k, v := range extra {
			ann[k] = v
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fsv1.StackLabel: "hijack"}, Annotations: ann},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "nginx",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}}}}
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		setPodReady(t, pod, true)
	}
	forgedPod(outside, "forger", nil)
	lb := stackService("hijack", "hijack")
	lb.Namespace, lb.Spec.Type = outside, corev1.ServiceTypeLoadBalancer
	if err := k8s.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, sliceWait, func() error {
		events := &corev1.EventList{}
		if err := k8s.List(ctx, events, client.InNamespace(outside)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == controller.EventNamespaceNotOptedIn && e.InvolvedObject.Name == "hijack" {
				return nil
			}
		}
		return fmt.Errorf("no %s Event on the Service yet", controller.EventNamespaceNotOptedIn)
	})
	slices := &discoveryv1.EndpointSliceList{}
	if err := k8s.List(ctx, slices, client.InNamespace(outside)); err != nil || len(slices.Items) != 0 {
		t.Fatalf("slices published in a namespace that never opted in: %+v, %v", slices.Items, err)
	}

	// Opted in, but the pod opted out of injection: no claim holds its addresses. (Not named
	// opted-out: TestPodsInjectedLikeTheGoldens creates the opt-out fixture by that name in this
	// namespace.)
	forgedPod(optedInNS, "forger-opted-out", map[string]string{fsv1.InjectAnnotation: "false"})
	svc := stackService("hijack", "hijack")
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, sliceWait, func() error {
		events := &corev1.EventList{}
		if err := k8s.List(ctx, events, client.InNamespace(optedInNS)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == controller.EventPodNotPublished && e.InvolvedObject.Name == "hijack" {
				return nil
			}
		}
		return fmt.Errorf("no %s Event on the Service yet", controller.EventPodNotPublished)
	})
	if items, err := serviceSlices("hijack"); err != nil || len(items) != 0 {
		t.Fatalf("the opted-out pod's forged addresses were published: %+v, %v", items, err)
	}
}
