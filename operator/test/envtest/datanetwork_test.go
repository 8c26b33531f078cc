package envtest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// quickstartNetwork is the quickstart's network as a platform would run it: the router
// 10.57.0.1, VLAN 100, MACs derived, the namespace web granted .10-.50 and the namespace tenant
// .100-.150, and nodes labelled for it.
func quickstartNetwork(name string) *fsv1.DataNetwork {
	return &fsv1.DataNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fsv1.DataNetworkSpec{
		Subnets: []string{"10.57.0.0/24"}, Gateways: []string{"10.57.0.1"}, Reserved: []string{"10.57.0.2-10.57.0.9"},
		VLANs: []int32{100}, NodeSelector: map[string]string{"example.com/data-network": name},
		Grants: []fsv1.AddressGrant{
			{Namespaces: []string{optedInNS}, Ranges: []string{"10.57.0.10-10.57.0.50"}},
			{Namespaces: []string{baselineNS}, Ranges: []string{"10.57.0.100-10.57.0.150"}},
		},
	}}
}

// onNetwork is the vhost-user sample on network, with address.
func onNetwork(t *testing.T, name, network, address string) *fsv1.StackInstance {
	si := stack(t, "vhost-user", name)
	p := &si.Spec.Ports[0]
	p.DataNetwork, p.Device.VhostUser.MAC = network, ""
	p.IPv4 = &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: address, Gateway: "10.57.0.1"}
	return si
}

// Issue 38: each thing a security review did as a tenant on the shared data network is refused
// at admission, with the field and the fix, and nothing is stored.
func TestDataNetworkRefusesWhatItDoesNotGrant(t *testing.T) {
	ctx := context.Background()
	dn := quickstartNetwork("quickstart-net")
	if err := k8s.Create(ctx, dn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, dn) })
	cases := []struct {
		name   string
		mutate func(*fsv1.StackInstance)
		want   []string
	}{
		{"router-address", func(si *fsv1.StackInstance) { si.Spec.Ports[0].IPv4.Address = "10.57.0.1/24" },
			[]string{"spec.ports[0].ipv4.address", "10.57.0.1 is a gateway of DataNetwork quickstart-net"}},
		{"router-mac", func(si *fsv1.StackInstance) { si.Spec.Ports[0].Device.VhostUser.MAC = "02:00:00:00:00:01" },
			[]string{"spec.ports[0].device.vhostUser.mac", "derives every port's MAC"}},
		{"service-vip", func(si *fsv1.StackInstance) { si.Spec.Ports[0].VIPs = []string{"10.96.0.10"} },
			[]string{"spec.ports[0].vips[0]", "10.96.0.10 is not granted to this namespace"}},
		{"ungranted-vlan", func(si *fsv1.StackInstance) {
			si.Spec.Ports[0].IPv4 = nil
			si.Spec.VLANs = []fsv1.VLANSpec{{ID: 200, Port: "data", Addressing: fsv1.Addressing{
				IPv4: &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: "10.57.0.11/24", Gateway: "10.57.0.1"}}}}
		}, []string{"spec.vlans[0].id", "does not carry VLAN 200"}},
		{"another-namespaces-range", func(si *fsv1.StackInstance) { si.Spec.Ports[0].IPv4.Address = "10.57.0.120/24" },
			[]string{"spec.ports[0].ipv4.address", "not granted to this namespace"}},
		{"reserved", func(si *fsv1.StackInstance) { si.Spec.Ports[0].IPv4.Address = "10.57.0.5/24" },
			[]string{"reserved on DataNetwork quickstart-net"}},
		{"pool-over-reserved", func(si *fsv1.StackInstance) {
			si.Spec.Ports[0].IPv4 = &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: "10.57.0.1",
				Pool: &fsv1.IPPool{Ranges: []string{"10.57.0.5-10.57.0.20"}, PrefixLength: 24}}
		}, []string{"spec.ports[0].ipv4.pool.ranges[0]", "overlaps 10.57.0.2-10.57.0.9, reserved"}},
		{"pool-into-another-namespace", func(si *fsv1.StackInstance) {
			si.Spec.Ports[0].IPv4 = &fsv1.IPv4Address{From: fsv1.AddressPool, Gateway: "10.57.0.1",
				Pool: &fsv1.IPPool{Ranges: []string{"10.57.0.40-10.57.0.110"}, PrefixLength: 24}}
		}, []string{"spec.ports[0].ipv4.pool.ranges[0]", "not all granted to this namespace"}},
		{"foreign-gateway", func(si *fsv1.StackInstance) { si.Spec.Ports[0].IPv4.Gateway = "10.57.0.12" },
			[]string{"spec.ports[0].ipv4.gateway", "not a gateway of DataNetwork quickstart-net"}},
		{"unknown-network", func(si *fsv1.StackInstance) { si.Spec.Ports[0].DataNetwork = "nope" },
			[]string{"spec.ports[0].dataNetwork", `"nope"`, "Not found"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			si := onNetwork(t, "dn-"+c.name, dn.Name, "10.57.0.11/24")
			c.mutate(si)
			wantErr(t, k8s.Create(ctx, si), c.want...)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(si), &fsv1.StackInstance{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a refused StackInstance was stored: %v", err)
			}
		})
	}
	// A namespace the network grants nothing.
	other := onNetwork(t, "dn-plain", dn.Name, "10.57.0.11/24")
	other.Namespace = plainNS
	wantErr(t, k8s.Create(ctx, other), "spec.ports[0].dataNetwork", `grants namespace "plain" no addresses`)

	// What the network grants is admitted.
	if err := k8s.Create(ctx, onNetwork(t, "dn-granted", dn.Name, "10.57.0.11/24")); err != nil {
		t.Fatal(err)
	}
}

// The pod injector holds every pod to the network again: a grant revoked after the stack was
// admitted refuses its next pod, and a network's nodes are in the pod's node affinity.
func TestDataNetworkHoldsEveryPod(t *testing.T) {
	ctx := context.Background()
	dn := quickstartNetwork("pod-net")
	if err := k8s.Create(ctx, dn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, dn) })
	si := onNetwork(t, "dn-pods", dn.Name, "10.57.0.12/24")
	if err := k8s.Create(ctx, si); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, si) })

	pod := fixtures.LoadPod(t, "nginx-vhost")
	pod.Namespace, pod.Name, pod.Labels[fsv1.StackLabel] = optedInNS, "dn-pod-1", si.Name
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, pod) })
	if !requiresLabel(pod, "example.com/data-network", dn.Name) {
		t.Fatalf("the pod's node affinity does not require the network's node label: %+v", pod.Spec.Affinity)
	}

	// The platform takes the namespace's grant away: the next pod is refused, saying why.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dn), dn); err != nil {
		t.Fatal(err)
	}
	dn.Spec.Grants = dn.Spec.Grants[1:]
	if err := k8s.Update(ctx, dn); err != nil {
		t.Fatal(err)
	}
	second := fixtures.LoadPod(t, "nginx-vhost")
	second.Namespace, second.Name, second.Labels[fsv1.StackLabel] = optedInNS, "dn-pod-2", si.Name
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := k8s.Create(ctx, second)
		if err != nil && strings.Contains(err.Error(), `grants namespace "web" no addresses`) {
			break
		}
		if err == nil {
			_ = k8s.Delete(ctx, second)
			second.ResourceVersion = ""
		}
		if time.Now().After(deadline) {
			t.Fatalf("a pod of a stack whose grant was revoked was not refused for it: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func requiresLabel(pod *corev1.Pod, key, value string) bool {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		found := false
		for _, e := range term.MatchExpressions {
			if e.Key == key && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 && e.Values[0] == value {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
