package inject

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// withNetwork gives the vhost-user sample's port (attachment net1, 10.99.0.10/24, MAC
// 02:fe:00:00:00:01) the network ref.
func withNetwork(ref *fsv1.NetworkRef) fixtures.StackOption {
	return func(si *fsv1.StackInstance) { si.Spec.Ports[0].Network = ref }
}

// ours is the entry the injector writes for the sample's port: its binding names the port's
// DataNetwork, testConfig's default.
const ours = `{"name":"fstack-net","interface":"net1","ips":["10.99.0.10/24"],"mac":"02:fe:00:00:00:01","cni-args":{"kubefstack.io/binding":{"network":"envtest-net"}}}`

func TestNetworksAnnotationMerged(t *testing.T) {
	cases := []struct {
		name, have, want string
		ref              *fsv1.NetworkRef
	}{
		{"none before", "", "[" + ours + "]", &fsv1.NetworkRef{Name: "fstack-net"}},
		{"namespace given", "",
			`[{"name":"fstack-net","namespace":"infra","interface":"net1","ips":["10.99.0.10/24"],"mac":"02:fe:00:00:00:01","cni-args":{"kubefstack.io/binding":{"network":"envtest-net"}}}]`,
			&fsv1.NetworkRef{Name: "fstack-net", Namespace: "infra"}},
		{"JSON entries of the pod kept verbatim, ours after them", `[{"name":"mgmt","interface":"net2","default-route":["10.0.0.1"]}]`,
			`[{"name":"mgmt","interface":"net2","default-route":["10.0.0.1"]},` + ours + "]", &fsv1.NetworkRef{Name: "fstack-net"}},
		{"comma form read, kept in place", "web/mgmt@eth9, other",
			`[{"name":"mgmt","namespace":"web","interface":"eth9"},{"name":"other"},` + ours + "]", &fsv1.NetworkRef{Name: "fstack-net"}},
		{"the same network for the interface is replaced", "fstack-net@net1",
			"[" + ours + "]", &fsv1.NetworkRef{Name: "fstack-net"}},
		{"an entry without interface is net1 by position, and the same network", "web/fstack-net",
			"[" + ours + "]", &fsv1.NetworkRef{Name: "fstack-net"}},
		{"a repeat of the same entry goes", "fstack-net@net1, mgmt@eth9, web/fstack-net@net1",
			"[" + ours + `,{"name":"mgmt","interface":"eth9"}]`, &fsv1.NetworkRef{Name: "fstack-net"}},
		{"the same network with the same MAC and ips", `[{"name":"fstack-net","interface":"net1","mac":"02:FE:00:00:00:01","ips":["10.99.0.10/24"]}]`,
			"[" + ours + "]", &fsv1.NetworkRef{Name: "fstack-net"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stack := fixtures.Stack(t, "vhost-user", withNetwork(tc.ref))
			opts := []fixtures.PodOption{}
			if tc.have != "" {
				opts = append(opts, fixtures.WithAnnotation(podcontract.NetworksAnnotation, tc.have))
			}
			pod := fixtures.LoadPod(t, "nginx-vhost", opts...)
			out, d, err := Inject(pod, stack, testConfig())
			if err != nil || d != Injected {
				t.Fatalf("decision %q, error %v", d, err)
			}
			if diff := cmp.Diff(tc.want, out.Annotations[podcontract.NetworksAnnotation]); diff != "" {
				t.Errorf("networks annotation (-want +got):\n%s", diff)
			}
			var list []map[string]any
			if err := json.Unmarshal([]byte(out.Annotations[podcontract.NetworksAnnotation]), &list); err != nil {
				t.Fatalf("the annotation is not the JSON list Multus reads: %v", err)
			}
		})
	}
}

func TestNetworksAnnotationConflictsRefused(t *testing.T) {
	cases := []struct{ name, have, mentions string }{
		{"another network for the interface", `[{"name":"other","interface":"net1"}]`,
			`network web/other to interface net1, where StackInstance "vhost-user"'s spec.ports[0].network puts network web/fstack-net`},
		{"another network at net1 by position", "other",
			"network web/other to interface net1"},
		{"the network of another namespace", "infra/fstack-net@net1",
			"network infra/fstack-net to interface net1"},
		{"another MAC", `[{"name":"fstack-net","interface":"net1","mac":"02:00:00:00:00:09"}]`,
			"spec.ports[0].device.vhostUser.mac"},
		{"other ips", `[{"name":"fstack-net","interface":"net1","ips":["10.99.0.11/24"]}]`,
			"spec.ports[0] static addresses are [10.99.0.10/24]"},
		{"malformed JSON", `[{"name":`, "not a JSON list"},
		{"a JSON object, not a list", `{"name":"fstack-net"}`, "not a JSON list"},
		{"a bad comma entry", "web/a/b", "is not a DNS-1123 label"},
		{"an empty comma entry", "mgmt,", "entry 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stack := fixtures.Stack(t, "vhost-user", withNetwork(&fsv1.NetworkRef{Name: "fstack-net"}))
			pod := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithAnnotation(podcontract.NetworksAnnotation, tc.have))
			_, _, err := Inject(pod, stack, testConfig())
			if err == nil {
				t.Fatal("injected; want the pod refused")
			}
			msg := err.Error()
			if !strings.Contains(msg, "metadata.annotations[k8s.v1.cni.cncf.io/networks]") || !strings.Contains(msg, tc.mentions) {
				t.Errorf("want an error at the annotation mentioning %q, got:\n%s", tc.mentions, msg)
			}
		})
	}
}

// A stack whose ports name no network leaves the pod's annotation as it was (the chained path, or
// an annotation the user wrote).
func TestNetworksAnnotationUntouchedWithoutNetwork(t *testing.T) {
	for _, have := range []string{"", "anything, even @@ not parseable"} {
		opts := []fixtures.PodOption{}
		if have != "" {
			opts = append(opts, fixtures.WithAnnotation(podcontract.NetworksAnnotation, have))
		}
		out, d, err := Inject(fixtures.LoadPod(t, "nginx-vhost", opts...), fixtures.Stack(t, "vhost-user"), testConfig())
		if err != nil || d != Injected {
			t.Fatalf("decision %q, error %v", d, err)
		}
		if got, ok := out.Annotations[podcontract.NetworksAnnotation]; got != have || (have == "" && ok) {
			t.Errorf("annotation %q became %q", have, got)
		}
	}
}

// A port whose address comes from the attachment takes the network's IPAM lease: no ips (its
// binding names its network alone).
func TestNetworksEntryOfAttachmentAddressHasNoIPs(t *testing.T) {
	stack := fixtures.Stack(t, "vhost-user", withNetwork(&fsv1.NetworkRef{Name: "fstack-net"}), func(si *fsv1.StackInstance) {
		si.Spec.Ports[0].IPv4 = &fsv1.IPv4Address{From: fsv1.AddressAttachment}
		si.Spec.Ports[0].Device.VhostUser.MAC = ""
	})
	out, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost"), stack, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.Annotations[podcontract.NetworksAnnotation], `[{"name":"fstack-net","interface":"net1","cni-args":{"kubefstack.io/binding":{"network":"envtest-net"}}}]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// FuzzNetworksAnnotation: whatever a pod carries in its networks annotation, injection never
// panics, refuses only at that annotation's path, and an accepted pod's annotation is a JSON list
// that Multus reads with exactly one entry for the port's interface, the injector's, which
// merging again leaves as it is.
func FuzzNetworksAnnotation(f *testing.F) {
	for _, seed := range []string{"", "mgmt", "web/mgmt@eth9, other", "fstack-net@net1", ours, "[" + ours + "]",
		`[{"name":"mgmt","interface":"net2","default-route":["10.0.0.1"]}]`, `[{"name":"other","interface":"net1"}]`,
		`[null]`, `[{"name":"x","interface":"net1","ips":["1.2.3.4/8"]}]`, "a/b/c,@,,", "fstack-net@net1,fstack-net@net1"} {
		f.Add(seed)
	}
	stack := fixtures.Stack(f, "vhost-user", withNetwork(&fsv1.NetworkRef{Name: "fstack-net"}))
	prep, err := Prepare(stack, testConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, have string) {
		pod := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithAnnotation(podcontract.NetworksAnnotation, have))
		out, _, err := prep.Inject(pod)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || len(re.Errs) == 0 {
				t.Fatalf("refused without field errors: %v", err)
			}
			for _, e := range re.Errs {
				if e.Field != networksPath().String() {
					t.Fatalf("refused at %s: %v", e.Field, e)
				}
			}
			return
		}
		got := out.Annotations[podcontract.NetworksAnnotation]
		entries, err := podcontract.ParseNetworks(got)
		if err != nil || !strings.HasPrefix(got, "[") {
			t.Fatalf("annotation %q is not a JSON list Multus reads: %v", got, err)
		}
		n := 0
		for _, e := range entries {
			if e.Interface == "net1" {
				n++
				if string(e.Raw) != ours {
					t.Fatalf("the entry for net1 is %s, want %s", e.Raw, ours)
				}
			}
		}
		if n != 1 {
			t.Fatalf("%d entries for net1 in %s", n, got)
		}
		again, _, err := prep.Inject(fixtures.LoadPod(t, "nginx-vhost", fixtures.WithAnnotation(podcontract.NetworksAnnotation, got)))
		if err != nil || again.Annotations[podcontract.NetworksAnnotation] != got {
			t.Fatalf("merging %s again: %v, %q", got, err, again.Annotations[podcontract.NetworksAnnotation])
		}
	})
}
