package controller

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

var (
	static4 = fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: "10.56.0.10/24"}}
	dual    = fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: "10.56.0.10/24"},
		IPv6: &fsv1.IPv6Address{From: fsv1.AddressStatic, Address: "2001:db8::10/64"}}
	attach = fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressAttachment}}
)

// IPv4 and IPv6 endpoints go in separate slices; a named targetPort resolves per pod, so pods
// that resolve it differently land in different slices; the conditions follow the pod.
func TestDesiredSlices(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "front",
		Annotations: map[string]string{podcontract.ServiceStackAnnotation: "s"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")},
			{Name: "alt", Port: 8080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9090)},
			{Name: "same", Port: 443, Protocol: corev1.ProtocolTCP}}}}
	a := fixtures.SnapshotPod(t, "a", []fsv1.Addressing{dual}, map[string]string{podcontract.AddressesAnnotation: "0:data=10.56.0.10,0:data=2001:db8::10"})
	a.Spec.Containers = []corev1.Container{{Name: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}}
	b := fixtures.SnapshotPod(t, "b", []fsv1.Addressing{static4}, map[string]string{podcontract.AddressesAnnotation: "0=10.56.0.20"})
	b.Spec.Containers = []corev1.Container{{Name: podcontract.DataplaneContainer, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 1}}},
		{Name: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}}
	now := metav1.Now()
	b.DeletionTimestamp = &now
	c := fixtures.SnapshotPod(t, "c", []fsv1.Addressing{static4}, map[string]string{podcontract.AddressesAnnotation: "0=10.56.0.30"})
	c.Status.Conditions = nil // not Ready; and it names no "http" port
	d := fixtures.SnapshotPod(t, "d", []fsv1.Addressing{attach}, nil)
	done := fixtures.SnapshotPod(t, "e", []fsv1.Addressing{static4}, nil)
	done.Status.Phase = corev1.PodSucceeded

	// Each pod's claims: a's two, b's and c's one; d serves none.
	held := map[netip.Addr]hold{}
	for _, p := range []corev1.Pod{a, b, c} {
		addrs, err := podcontract.ParseAddresses(p.Annotations[podcontract.AddressesAnnotation])
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range addrs {
			held[x.Addr] = hold{pod: p.UID}
		}
	}
	got, skipped := desiredSlices(svc, []corev1.Pod{c, b, a, d, done}, held)
	if len(skipped) != 1 || skipped[0].pod != "d" || !strings.Contains(skipped[0].why, "attachment") {
		t.Fatalf("skipped %+v", skipped)
	}
	type ep struct {
		addr                        string
		ready, serving, terminating bool
	}
	summary := map[string][]ep{}
	for _, s := range got {
		if s.Labels[discoveryv1.LabelServiceName] != "front" || s.Labels[discoveryv1.LabelManagedBy] != EndpointSliceManagedBy ||
			!strings.HasPrefix(s.Name, "front-fstack-"+strings.ToLower(string(s.AddressType))+"-") {
			t.Fatalf("slice %s labels %v", s.Name, s.Labels)
		}
		key := string(s.AddressType) + " " + portsKey(s.Ports)
		for _, e := range s.Endpoints {
			if *e.NodeName != "node-a" || e.TargetRef.Kind != "Pod" || e.TargetRef.Namespace != "web" {
				t.Fatalf("endpoint %+v", e)
			}
			summary[key] = append(summary[key], ep{e.Addresses[0], *e.Conditions.Ready, *e.Conditions.Serving, *e.Conditions.Terminating})
		}
	}
	want := map[string][]ep{
		"IPv4 http:TCP:8000;alt:TCP:9090;same:TCP:443;": {{"10.56.0.10", true, true, false}, {"10.56.0.20", false, true, true}},
		"IPv6 http:TCP:8000;alt:TCP:9090;same:TCP:443;": {{"2001:db8::10", true, true, false}},
		"IPv4 alt:TCP:9090;same:TCP:443;":               {{"10.56.0.30", false, false, false}},
	}
	if len(got) != 3 || len(summary) != len(want) {
		t.Fatalf("slices %v, want %v", summary, want)
	}
	for k, w := range want {
		if g := summary[k]; len(g) != len(w) || g[0] != w[0] || len(w) > 1 && g[1] != w[1] {
			t.Fatalf("slice %q: %v, want %v (all: %v)", k, g, w, summary)
		}
	}
	// The same pods give the same names: a stale cache updates rather than duplicates.
	again, _ := desiredSlices(svc, []corev1.Pod{a, b, c}, held)
	for i := range again {
		if again[i].Name != got[i].Name {
			t.Fatalf("names moved: %s, %s", again[i].Name, got[i].Name)
		}
	}
}

// Issue 38, the endpoint hijack: a pod publishes only the addresses an AddressClaim it owns
// holds. Its annotation naming another address (a Service's ClusterIP, a node's address, a
// neighbour's), an address whose claim another pod owns, or one whose claim no pod owns yet:
// the pod is left out, and the reason names the addresses.
func TestOnlyClaimedAddressesArePublished(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "front",
		Annotations: map[string]string{podcontract.ServiceStackAnnotation: "s"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	owner := fixtures.SnapshotPod(t, "owner", []fsv1.Addressing{static4}, map[string]string{podcontract.AddressesAnnotation: "0:data=10.56.0.10"})
	forger := fixtures.SnapshotPod(t, "forger", []fsv1.Addressing{static4},
		map[string]string{podcontract.AddressesAnnotation: "0=10.244.3.17,0=10.96.0.10,0=192.168.1.10"})
	thief := fixtures.SnapshotPod(t, "thief", []fsv1.Addressing{static4}, map[string]string{podcontract.AddressesAnnotation: "0=10.56.0.10"})
	held := map[netip.Addr]hold{netip.MustParseAddr("10.56.0.10"): {pod: owner.UID}}
	got, skipped := desiredSlices(svc, []corev1.Pod{owner, forger, thief}, held)
	if len(got) != 1 || len(got[0].Endpoints) != 1 || got[0].Endpoints[0].Addresses[0] != "10.56.0.10" || got[0].Endpoints[0].TargetRef.Name != "owner" {
		t.Fatalf("published %+v, want 10.56.0.10 of pod owner alone", got)
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0].why+skipped[1].why, "10.244.3.17, 10.96.0.10, 192.168.1.10, which no AddressClaim of the pod holds") {
		t.Fatalf("skipped %+v", skipped)
	}
	if got, _ := desiredSlices(svc, []corev1.Pod{owner}, nil); len(got) != 0 {
		t.Fatalf("a pod without a claim was published: %+v", got)
	}
	// Claimed, not bound yet (a moment after the pod's creation): not published, and not a
	// problem anyone must fix.
	pending := map[netip.Addr]hold{netip.MustParseAddr("10.56.0.10"): {}}
	got, skipped = desiredSlices(svc, []corev1.Pod{owner}, pending)
	if len(got) != 0 || len(skipped) != 1 || !skipped[0].pending {
		t.Fatalf("a pod whose claim is not bound yet: published %+v, skipped %+v", got, skipped)
	}
	// Bound to the pod, but outside its network's subnets (heldAddresses says why): not
	// published, and said.
	outside := map[netip.Addr]hold{netip.MustParseAddr("10.56.0.10"): {pod: owner.UID, problem: `it is outside DataNetwork "net"'s subnets`}}
	got, skipped = desiredSlices(svc, []corev1.Pod{owner}, outside)
	if len(got) != 0 || len(skipped) != 1 || skipped[0].pending || !strings.Contains(skipped[0].why, `10.56.0.10: it is outside DataNetwork "net"'s subnets`) {
		t.Fatalf("a pod whose address is outside its network: published %+v, skipped %+v", got, skipped)
	}
}

// A headless Service's slices carry the headless label kube-proxy skips them by.
func TestHeadlessSliceLabel(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "h"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}
	if _, ok := sliceLabels(svc)[corev1.IsHeadlessService]; !ok {
		t.Fatal("no headless label")
	}
	if _, ok := sliceLabels(&corev1.Service{})[corev1.IsHeadlessService]; ok {
		t.Fatal("headless label on a ClusterIP Service")
	}
}

// The Service cache keeps what the controller reads of an opted-in Service, and only the name
// of the others.
func TestTrimService(t *testing.T) {
	in := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "x", Labels: map[string]string{"a": "b"},
		Annotations: map[string]string{podcontract.ServiceStackAnnotation: "s", podcontract.ServiceStackPortAnnotation: "data", "other": "y"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, ClusterIP: "10.0.0.1", ExternalIPs: []string{"1.2.3.4"}}}
	out, _ := TrimService(in)
	s := out.(*corev1.Service)
	if len(s.Annotations) != 2 || s.Labels != nil || len(s.Spec.Ports) != 1 || s.Spec.ClusterIP != "10.0.0.1" || s.Spec.ExternalIPs != nil {
		t.Fatalf("trimmed %+v", s)
	}
	delete(in.Annotations, podcontract.ServiceStackAnnotation)
	out, _ = TrimService(in)
	if s := out.(*corev1.Service); s.Annotations != nil || len(s.Spec.Ports) != 0 || s.Name != "x" {
		t.Fatalf("trimmed a Service that does not opt in to %+v", s)
	}
}
