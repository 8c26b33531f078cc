package v1alpha1_test

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
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

// TestSchemaDefaultsMatchRenderer: for every sample and every test StackInstance, the spec the
// API server stores (the CRD's defaults applied by kube-apiserver's own code) renders byte for
// byte as the manifest as written renders alone (the renderer applies the same CRD's defaults
// through crdwalk): what `kubectl fstack render` printed before it admitted manifests, what the
// operator renders and what the dataplane renders agree. A spec the renderer refuses is refused
// in the same words both ways.
func TestSchemaDefaultsMatchRenderer(t *testing.T) {
	c := fixtures.CRD(t)
	objs := fixtures.SampleObjects(t)
	maps.Copy(objs, fixtures.StackObjects(t))
	if len(objs) < 10 {
		t.Fatalf("want the samples and the test stacks, got %d", len(objs))
	}
	for name, obj := range objs {
		written := decode(t, obj)
		if errs := c.Admit(obj); len(errs) > 0 {
			t.Fatalf("%s: the API server refuses it: %v", name, errs.ToAggregate())
		}
		stored := decode(t, obj)
		checkedA, errA := render.Prepare(&written.Spec)
		checkedB, errB := render.Prepare(&stored.Spec)
		if fmt.Sprint(errA) != fmt.Sprint(errB) {
			t.Errorf("%s: the renderer alone says %v, after the API server's defaults %v", name, errA, errB)
			continue
		}
		if len(errA) > 0 {
			continue
		}
		a, b := checkedA.Placeholder(), checkedB.Placeholder()
		if !bytes.Equal(a.Config, b.Config) || !reflect.DeepEqual(a.EAL, b.EAL) || !reflect.DeepEqual(a.ShimEnv, b.ShimEnv) {
			t.Errorf("%s: schema defaults change the render:\n%s\n%v\n---\n%s\n%v", name, a.Config, a.EAL, b.Config, b.EAL)
		}
	}
}

// TestUpstreamVhostUserGetsGigPagesEverywhere: an Upstream image with a vhost-user port and only
// an amount of hugepages (issue 20, the fixture stacks/upstream-vhost.yaml) is admitted by the CRD and by the webhook's check
// (render.Prepare on the stored object), and every path renders it with 1Gi pages: unpatched
// F-Stack cannot serve vhost-user from 2Mi pages. Before, the CRD's static 2Mi default made the
// cluster refuse what `kubectl fstack render` accepted.
func TestUpstreamVhostUserGetsGigPagesEverywhere(t *testing.T) {
	obj := fixtures.StackObjects(t)["upstream-vhost"]
	written := decode(t, obj)
	if errs := fixtures.CRD(t).Admit(obj); len(errs) > 0 {
		t.Fatalf("the API server refuses it: %v", errs.ToAggregate())
	}
	stored := decode(t, obj)
	if _, errs := render.Prepare(&stored.Spec); len(errs) > 0 {
		t.Fatalf("the webhook refuses what the API server stored: %v", errs.ToAggregate())
	}
	for what, spec := range map[string]*fsv1.StackInstanceSpec{"as written": &written.Spec, "as stored": &stored.Spec} {
		checked, errs := render.Prepare(spec)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", what, errs.ToAggregate())
		}
		if got := checked.Defaulted().Dataplane.HugePages.PageSize; got != fsv1.HugePages1Gi {
			t.Errorf("%s: renders with %s pages, want 1Gi", what, got)
		}
		if got := checked.Defaulted().Dataplane.HugePages.Amount.String(); got != "2Gi" {
			t.Errorf("%s: renders %s of hugepages, want the 2Gi asked for", what, got)
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
