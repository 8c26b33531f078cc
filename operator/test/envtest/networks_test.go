package envtest

import (
	"context"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

// A StackInstance port that names a NetworkAttachmentDefinition puts it in the pod's Multus
// networks annotation through the real API server and webhook: the pod's own entries stay, the
// port's comes with its static address and MAC; a pod entry that gives the interface another
// network is refused at the annotation's path.
func TestPodNetworksAnnotationFromStackInstance(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "with-network")
	si.Spec.Ports[0].Network = &fsv1.NetworkRef{Name: "fstack-net"}
	testenv.CreateIfAbsent(t, k8s, si)

	pod := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithName("with-network"), fixtures.WithStackLabel(si.Name),
		fixtures.WithAnnotation(podcontract.NetworksAnnotation, "mgmt@eth9"))
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatalf("create: %v", err)
	}
	// It holds the sample's static address, which one pod of the cluster may hold: bound, its
	// claim goes with it.
	testenv.DeleteAtEnd(t, k8s, pod)
	waitBound(t, claimKey("10.99.0.10"), pod)
	want := `[{"name":"mgmt","interface":"eth9"},{"name":"fstack-net","interface":"net1","ips":["10.99.0.10/24"],"mac":"02:fe:00:00:00:01","cni-args":{"kubefstack.io/binding":{"network":"envtest-net"}}}]`
	if got := pod.Annotations[podcontract.NetworksAnnotation]; got != want {
		t.Fatalf("networks annotation:\n got %s\nwant %s", got, want)
	}

	clash := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithName("network-clash"), fixtures.WithStackLabel(si.Name),
		fixtures.WithAnnotation(podcontract.NetworksAnnotation, `[{"name":"other","interface":"net1"}]`))
	wantErr(t, k8s.Create(ctx, clash), "metadata.annotations[k8s.v1.cni.cncf.io/networks]",
		"network web/other to interface net1", "spec.ports[0].network")
}

// The CRD refuses a network name Multus cannot read, and the webhook two ports that ask Multus
// for one interface, each at its field path.
func TestStackInstanceNetworkValidated(t *testing.T) {
	ctx := context.Background()
	bad := stack(t, "vhost-user", "network-bad-name")
	bad.Spec.Ports[0].Network = &fsv1.NetworkRef{Name: "Fstack_Net"}
	wantErr(t, k8s.Create(ctx, bad), "spec.ports[0].network.name")

	dup := stack(t, "vhost-user", "network-one-interface")
	dup.Spec.Ports[0].Network = &fsv1.NetworkRef{Name: "fstack-net"}
	second := dup.Spec.Ports[0].DeepCopy()
	second.Name, second.Network = "second", &fsv1.NetworkRef{Name: "other"}
	second.IPv4 = &fsv1.IPv4Address{Address: "10.98.0.10/24", Gateway: "10.98.0.1"}
	second.Device.VhostUser.MAC = ""
	dup.Spec.Ports = append(dup.Spec.Ports, *second)
	dup.Spec.Processes = 2
	wantErr(t, k8s.Create(ctx, dup), "admission webhook", "spec.ports[1].attachment", "interface net1")
}
