package inject

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// withVIPsAndVLAN gives the vhost-user sample's port VIPs and a VLAN sub-interface with an
// address and a VIP of its own.
func withVIPsAndVLAN(si *fsv1.StackInstance) {
	p := &si.Spec.Ports[0]
	p.VIPs, p.VIPs6 = []string{"10.99.0.50"}, []string{"2001:db8::50"}
	si.Spec.VLANs = []fsv1.VLANSpec{{ID: 100, Port: p.Name, Addressing: fsv1.Addressing{
		IPv4: &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: "10.100.0.10/24", Gateway: "10.100.0.1"}, VIPs: []string{"10.100.0.50"}}}}
}

// fstack-cni drops whatever a port sends from an address or on a VLAN it was not told of: the
// injector tells it the stack's VIPs and VLANs, in the networks entry's cni-args (Multus) and
// in the binding annotation (a chained plugin), and the annotation replaces any the pod brought.
func TestStackVIPsAndVLANsReachTheCNIPlugin(t *testing.T) {
	stack := fixtures.Stack(t, "vhost-user", withNetwork(&fsv1.NetworkRef{Name: "fstack-net"}), withVIPsAndVLAN)
	pod := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithAnnotation(podcontract.BindingAnnotation, `{"net1":{"sources":["10.99.0.1"]}}`))
	out, d, err := Inject(pod, stack, testConfig())
	if err != nil || d != Injected {
		t.Fatalf("decision %q, error %v", d, err)
	}
	const sources = `"sources":["10.99.0.50","2001:db8::50","10.100.0.10","10.100.0.50"],"vlans":[100],"network":"envtest-net"`
	want := `[{"name":"fstack-net","interface":"net1","ips":["10.99.0.10/24"],"mac":"02:fe:00:00:00:01","cni-args":{"kubefstack.io/binding":{` + sources + `}}}]`
	if diff := cmp.Diff(want, out.Annotations[podcontract.NetworksAnnotation]); diff != "" {
		t.Errorf("networks annotation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(`{"net1":{"ips":["10.99.0.10/24"],`+sources+`}}`, out.Annotations[podcontract.BindingAnnotation]); diff != "" {
		t.Errorf("binding annotation (-want +got):\n%s", diff)
	}

	// A stack that binds nothing beyond its result leaves no annotation, the pod's own included,
	// when no network is named either (an operator without --default-data-network).
	plain := fixtures.Stack(t, "vhost-user", func(si *fsv1.StackInstance) { si.Spec.Ports[0].IPv4 = &fsv1.IPv4Address{From: fsv1.AddressAttachment} })
	noDefault := testConfig()
	noDefault.DefaultDataNetwork = ""
	out, d, err = Inject(fixtures.LoadPod(t, "nginx-vhost", fixtures.WithAnnotation(podcontract.BindingAnnotation, `{"net1":{"sources":["10.99.0.1"]}}`)), plain, noDefault)
	if err != nil || d != Injected {
		t.Fatalf("decision %q, error %v", d, err)
	}
	if v, ok := out.Annotations[podcontract.BindingAnnotation]; ok {
		t.Errorf("the pod's own binding annotation survived: %s", v)
	}
}

// Every vhost-user port's binding names the DataNetwork the port is on, its own dataNetwork or
// the injector's default, even when it binds nothing else: fstack-cni holds the port to that
// network's plan, and to the node's default network when the binding names none.
func TestTheBindingNamesThePortsNetwork(t *testing.T) {
	for _, tc := range []struct {
		name, portNetwork, want string
	}{
		{"the default", "", `{"net1":{"network":"envtest-net"}}`},
		{"the port's own", "tenant-b", `{"net1":{"network":"tenant-b"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stack := fixtures.Stack(t, "vhost-user", withNetwork(&fsv1.NetworkRef{Name: "fstack-net"}), func(si *fsv1.StackInstance) {
				si.Spec.Ports[0].IPv4 = &fsv1.IPv4Address{From: fsv1.AddressAttachment}
				si.Spec.Ports[0].DataNetwork = tc.portNetwork
			})
			out, d, err := Inject(fixtures.LoadPod(t, "nginx-vhost"), stack, testConfig())
			if err != nil || d != Injected {
				t.Fatalf("decision %q, error %v", d, err)
			}
			if diff := cmp.Diff(tc.want, out.Annotations[podcontract.BindingAnnotation]); diff != "" {
				t.Errorf("binding annotation (-want +got):\n%s", diff)
			}
			wantArgs := `"cni-args":{"kubefstack.io/binding":` + strings.TrimSuffix(strings.TrimPrefix(tc.want, `{"net1":`), "}") + "}"
			if got := out.Annotations[podcontract.NetworksAnnotation]; !strings.Contains(got, wantArgs) {
				t.Errorf("networks annotation %s lacks %s", got, wantArgs)
			}
		})
	}
}

// A stack whose vhost-user port would send from more addresses than fstack-cni binds on a port
// (podcontract.MaxBoundAddrs) is refused at admission with the port's field path, not at every
// pod's CNI ADD; one within the bound passes.
func TestCheckBindingsRefusesWhatNoPortCanBind(t *testing.T) {
	withVLANVIPs := func(vlans, vips int) *fsv1.StackInstance {
		si := fixtures.Stack(t, "vhost-user")
		for v := range vlans {
			vlan := fsv1.VLANSpec{ID: int32(100 + v), Port: si.Spec.Ports[0].Name}
			vlan.IPv4 = &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: fmt.Sprintf("10.%d.0.10/24", 100+v), Gateway: fmt.Sprintf("10.%d.0.1", 100+v)}
			for i := range vips {
				vlan.VIPs = append(vlan.VIPs, fmt.Sprintf("10.%d.1.%d", 100+v, i+1))
			}
			si.Spec.VLANs = append(si.Spec.VLANs, vlan)
		}
		return si
	}
	over := withVLANVIPs(5, 60) // 5 VLAN addresses and 300 VIPs
	checked, errs := render.Prepare(&over.Spec)
	if len(errs) > 0 {
		t.Fatalf("the spec must pass render.Prepare for this test to mean anything: %v", errs.ToAggregate())
	}
	got := CheckBindings(field.NewPath("spec"), checked)
	if len(got) != 1 || got[0].Field != "spec.ports[0]" || !strings.Contains(got[0].Detail, "at most 256") {
		t.Fatalf("CheckBindings = %v, want a refusal at spec.ports[0] naming the bound", got)
	}
	if _, err := Prepare(over, testConfig()); err == nil || !strings.Contains(err.Error(), "at most 256") {
		t.Fatalf("Prepare of a stack admitted before the bound: %v, want refused", err)
	}
	within := withVLANVIPs(2, 60)
	if checked, errs := render.Prepare(&within.Spec); len(errs) > 0 || len(CheckBindings(field.NewPath("spec"), checked)) > 0 {
		t.Fatalf("a stack within the bound was refused: %v", errs)
	}
}
