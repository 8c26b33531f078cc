package inject

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// withPools gives the vhost-user sample's port (attachment net1) an IPv4 and an IPv6 pool.
func withPools(si *fsv1.StackInstance) {
	p := &si.Spec.Ports[0]
	p.IPv4 = &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: "10.99.0.1",
		Pool: &fsv1.IPPool{Ranges: []string{"10.99.0.20-10.99.0.29", "10.99.0.40"}, PrefixLength: 24}}
	p.IPv6 = &fsv1.IPv6Address{From: fsv1.AddressPool, Gateway: "2001:db8::1",
		Pool: &fsv1.IPPool{Ranges: []string{"2001:db8::20-2001:db8::2f"}, PrefixLength: 64}}
}

// podSpec is the spec snapshot an injected pod carries.
func podSpec(t *testing.T, pod *corev1.Pod) *fsv1.StackInstanceSpec {
	t.Helper()
	s, err := snapshot.Decode([]byte(pod.Annotations[podcontract.SpecAnnotation]), pod.Annotations[podcontract.SpecVersionAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Issue 30: a pod of a pool stack serves the addresses admission claimed for it, and everything
// that says what the pod serves agrees: the spec the dataplane renders, the Multus entry that
// asks the network for them, and the addresses annotation EndpointSlices publish.
func TestPoolAddressesReachThePod(t *testing.T) {
	stack := fixtures.Stack(t, "vhost-user", withPools, withNetwork(&fsv1.NetworkRef{Name: "fstack-net"}))
	prep, err := Prepare(stack, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	needs := prep.AddressNeeds()
	if len(needs) != 2 || needs[0].Pool == nil || needs[0].Pool.Size() != 11 || needs[1].Pool == nil || needs[1].Pool.Size() != 16 {
		t.Fatalf("needs: want an IPv4 pool of 11 and an IPv6 pool of 16, got %+v", needs)
	}
	v4, v6 := netip.MustParseAddr("10.99.0.40"), netip.MustParseAddr("2001:db8::2a")
	pod, d, err := prep.InjectAddresses(fixtures.LoadPod(t, "nginx-vhost",
		fixtures.WithAnnotation(podcontract.AddressesAnnotation, "0=10.99.0.99")), []netip.Addr{v4, v6})
	if err != nil || d != Injected {
		t.Fatalf("decision %q, error %v", d, err)
	}
	if got, want := pod.Annotations[podcontract.AddressesAnnotation], "0:data=10.99.0.40,0:data=2001:db8::2a"; got != want {
		t.Errorf("addresses annotation %q, want %q (the pod's own value never stays)", got, want)
	}
	s := podSpec(t, pod)
	if a := s.Ports[0].IPv4; a.From != fsv1.AddressStatic || a.Address != "10.99.0.40/24" || a.Pool != nil || a.Gateway != "10.99.0.1" {
		t.Errorf("snapshot ipv4 %+v, want the pod's address as static 10.99.0.40/24 with the gateway", a)
	}
	if a := s.Ports[0].IPv6; a.From != fsv1.AddressStatic || a.Address != "2001:db8::2a/64" || a.Pool != nil {
		t.Errorf("snapshot ipv6 %+v, want static 2001:db8::2a/64", a)
	}
	// What the dataplane renders from the snapshot.
	checked := mustPrepare(t, s)
	res, err := render.Render(checked, render.PlaceholderFacts(checked))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Config), "addr=10.99.0.40\n") || !strings.Contains(string(res.Config), "addr6=2001:db8::2a\n") {
		t.Errorf("the dataplane's config does not serve the pod's addresses:\n%s", res.Config)
	}
	want := `[{"name":"fstack-net","interface":"net1","ips":["10.99.0.40/24","2001:db8::2a/64"],"mac":"02:fe:00:00:00:01","cni-args":{"kubefstack.io/binding":{"network":"envtest-net"}}}]`
	if got := pod.Annotations[podcontract.NetworksAnnotation]; got != want {
		t.Errorf("networks annotation\n got %s\nwant %s", got, want)
	}
	// The config hash stays the stack's: every pod of one spec runs the same config, but for its address.
	if pod.Annotations[podcontract.ConfigHashAnnotation] != prep.ConfigHash() {
		t.Error("the pod's config hash is not the stack's")
	}
	// A second pod with other addresses gets its own; the prepared stack is not changed.
	pod2, _, err := prep.InjectAddresses(fixtures.LoadPod(t, "nginx-vhost"),
		[]netip.Addr{netip.MustParseAddr("10.99.0.20"), netip.MustParseAddr("2001:db8::20")})
	if err != nil {
		t.Fatal(err)
	}
	if got := podSpec(t, pod2).Ports[0].IPv4.Address; got != "10.99.0.20/24" {
		t.Errorf("second pod serves %s, want 10.99.0.20/24", got)
	}
	if prep.spec.Ports[0].IPv4.From != fsv1.AddressPool {
		t.Error("injecting a pod changed the prepared stack")
	}
}

func TestPoolAddressOutsideThePoolRefused(t *testing.T) {
	prep, err := Prepare(fixtures.Stack(t, "vhost-user", withPools), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := prep.InjectAddresses(fixtures.LoadPod(t, "nginx-vhost"),
		[]netip.Addr{netip.MustParseAddr("10.99.0.30"), netip.MustParseAddr("2001:db8::20")}); err == nil {
		t.Fatal("10.99.0.30 is not in the pool, but the pod was injected with it")
	}
	if _, _, err := prep.InjectAddresses(fixtures.LoadPod(t, "nginx-vhost"), nil); err == nil {
		t.Fatal("a pod without its addresses was injected")
	}
}

// Without the webhook (kubectl fstack inject) no one claims a pool address: refused, saying why.
func TestPoolStackNeedsTheWebhook(t *testing.T) {
	_, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost"), fixtures.Stack(t, "vhost-user", withPools), testConfig())
	if err == nil || !strings.Contains(err.Error(), "only the operator's admission webhook assigns") ||
		!strings.Contains(err.Error(), "spec.ports[0].ipv4") {
		t.Fatalf("want the refusal naming the pool and the webhook, got %v", err)
	}
}

// A static address is recorded too (one pod serves it), and a value the pod brought is replaced.
func TestStaticAddressRecorded(t *testing.T) {
	pod, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost", fixtures.WithAnnotation(podcontract.AddressesAnnotation, "0=10.1.1.1")),
		fixtures.Stack(t, "vhost-user"), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Annotations[podcontract.AddressesAnnotation]; got != "0:data=10.99.0.10" {
		t.Errorf("addresses %q, want 0:data=10.99.0.10", got)
	}
	// An address from the attachment's IPAM is not known at admission: no annotation, and the
	// pod's own value is dropped.
	att := fixtures.Stack(t, "vhost-user", func(si *fsv1.StackInstance) {
		si.Spec.Ports[0].IPv4 = &fsv1.IPv4Address{From: fsv1.AddressAttachment}
	})
	pod, _, err = Inject(fixtures.LoadPod(t, "nginx-vhost", fixtures.WithAnnotation(podcontract.AddressesAnnotation, "0=10.1.1.1")), att, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := pod.Annotations[podcontract.AddressesAnnotation]; ok {
		t.Errorf("addresses %q on a pod whose address IPAM gives, want none", v)
	}
}

// Lab option spec.dpdk.cpuPolicy Shared: the dataplane asks for a fraction of a CPU without a
// limit (the pod is Burstable, so on the shared pool, and CFS never throttles its lcores), and
// app containers without Guaranteed resources are accepted.
func TestSharedCPUPolicy(t *testing.T) {
	shared := func(si *fsv1.StackInstance) { si.Spec.DPDK.CPUPolicy = fsv1.CPUShared }
	burstable := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}
	}
	if _, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost", burstable), fixtures.Stack(t, "vhost-user"), testConfig()); err == nil {
		t.Fatal("Exclusive: a Burstable app was accepted")
	}
	pod, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost", burstable), fixtures.Stack(t, "vhost-user", shared), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	var dp *corev1.Container
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == podcontract.DataplaneContainer {
			dp = &pod.Spec.InitContainers[i]
		}
	}
	if dp == nil {
		t.Fatal("no dataplane container")
	}
	if _, ok := dp.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("Shared: the dataplane has a CPU limit %v; CFS would throttle its busy-polling lcores", dp.Resources.Limits)
	}
	// The vhost-user sample has 2 processes: 2 CPUs under Exclusive, 200m under Shared.
	if q := dp.Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("200m")) != 0 {
		t.Errorf("Shared: the dataplane requests %s CPU, want 200m", q.String())
	}
	if dp.Resources.Limits.Memory().IsZero() || dp.Resources.Limits.Memory().Cmp(*dp.Resources.Requests.Memory()) != 0 {
		t.Errorf("Shared: memory must stay limited, limits %v requests %v", dp.Resources.Limits, dp.Resources.Requests)
	}
}
