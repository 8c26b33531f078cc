package v1alpha1_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// The generated CRD's OpenAPI schema, defaults and CEL rules, evaluated with the API server's own
// libraries (internal/crdschema; the envtest tier runs the same through a real
// kube-apiserver).

func TestSamplesPassTheCRD(t *testing.T) {
	c := fixtures.CRD(t)
	samples := fixtures.SampleObjects(t)
	if len(samples) < 6 {
		t.Fatalf("want the 6 samples, got %d", len(samples))
	}
	for name, obj := range samples {
		if errs := c.Admit(obj); len(errs) > 0 {
			t.Errorf("%s: %v", name, errs.ToAggregate())
		}
	}
}

// TestSchemaDefaultsMatchRenderer: the spec the API server stores (schema defaults applied) and
// the manifest as written render to the same config: offline renders and the operator agree.
func TestSchemaDefaultsMatchRenderer(t *testing.T) {
	c := fixtures.CRD(t)
	for name, obj := range fixtures.SampleObjects(t) {
		written := decode(t, obj)
		c.Admit(obj)
		stored := decode(t, obj)
		a, errA := render.Render(&written.Spec, render.PlaceholderFacts(&written.Spec))
		b, errB := render.Render(&stored.Spec, render.PlaceholderFacts(&stored.Spec))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v / %v", name, errA, errB)
		}
		if string(a.Config) != string(b.Config) {
			t.Errorf("%s: schema defaults change the rendered config:\n%s\n---\n%s", name, a.Config, b.Config)
		}
	}
}

func decode(t *testing.T, obj map[string]any) *fsv1.StackInstance {
	t.Helper()
	raw, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var si fsv1.StackInstance
	if err := yaml.UnmarshalStrict(raw, &si); err != nil {
		t.Fatal(err)
	}
	return &si
}

func TestCRDRejects(t *testing.T) {
	c := fixtures.CRD(t)
	cases := map[string]struct {
		spec, want string
	}{
		"no ports":                 {`{processes: 1, ports: []}`, "spec.ports"},
		"two devices":              {`{ports: [{name: a, device: {pci: {address: "0000:01:00.0"}, vhostUser: {}}, ipv4: {address: 10.0.0.1/24, gateway: 10.0.0.2}}]}`, "exactly one of vhostUser, pci or bond"},
		"static without gateway":   {`{ports: [{name: a, device: {pci: {address: "0000:01:00.0"}}, ipv4: {address: 10.0.0.1/24}}]}`, "gateway is required"},
		"pkt_tx_delay over 100":    {`{dpdk: {pktTxDelayMicroseconds: 101}, ports: [{name: a, device: {pci: {address: "0000:01:00.0"}}, ipv4: {address: 10.0.0.1/24, gateway: 10.0.0.2}}]}`, "pktTxDelayMicroseconds"},
		"vlan on a missing port":   {`{ports: [{name: a, device: {pci: {address: "0000:01:00.0"}}, ipv4: {address: 10.0.0.1/24, gateway: 10.0.0.2}}], vlans: [{id: 5, port: b, ipv4: {address: 10.0.5.1/24, gateway: 10.0.5.2}}]}`, "vlans[].port"},
		"process index too high":   {`{processes: 2, ports: [{name: a, processes: [2], device: {pci: {address: "0000:01:00.0"}}, ipv4: {address: 10.0.0.1/24, gateway: 10.0.0.2}}]}`, "below spec.processes"},
		"kni without method":       {`{kni: {enabled: true}, ports: [{name: a, device: {pci: {address: "0000:01:00.0"}}, ipv4: {address: 10.0.0.1/24, gateway: 10.0.0.2}}]}`, "method is required"},
		"polling with kernelEvent": {`{shim: {polling: true}, ports: [{name: a, device: {pci: {address: "0000:01:00.0"}}, ipv4: {address: 10.0.0.1/24, gateway: 10.0.0.2}}]}`, "polling and kernelEvent"},
		"bad PCI address":          {`{ports: [{name: a, device: {pci: {address: "3b:00"}}, ipv4: {address: 10.0.0.1/24, gateway: 10.0.0.2}}]}`, "spec.ports[0].device.pci.address"},
		"65 VIPs":                  {`{ports: [{name: a, device: {pci: {address: "0000:01:00.0"}}, ipv4: {address: 10.0.0.1/24, gateway: 10.0.0.2}, vips: [` + vips(65) + `]}]}`, "spec.ports[0].vips"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := map[string]any{}
			doc := "apiVersion: kubefstack.io/v1alpha1\nkind: StackInstance\nmetadata: {name: x, namespace: d}\nspec: " + tc.spec
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatal(err)
			}
			errs := c.Admit(obj)
			if errs == nil || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Errorf("want an error mentioning %q, got %v", tc.want, errs.ToAggregate())
			}
		})
	}
}

func vips(n int) string {
	var s []string
	for i := 0; i < n; i++ {
		s = append(s, "172.16.0."+string(rune('0'+i%10))+string(rune('0'+i/10)))
	}
	return strings.Join(s, ", ")
}
