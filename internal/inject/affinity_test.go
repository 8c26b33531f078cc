package inject

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// Adding the requirements again changes nothing, and with NodeAffinity off the pod keeps exactly
// the affinity it came with (none).
func TestNodeAffinityIdempotentAndOptional(t *testing.T) {
	stacks := fixtures.Stacks(t)
	pod := fixtures.LoadPod(t, "nginx-vhost")
	out, _, err := Inject(pod, stacks["vhost-user"], testConfig())
	if err != nil {
		t.Fatal(err)
	}
	prep, err := Prepare(stacks["vhost-user"], testConfig())
	if err != nil {
		t.Fatal(err)
	}
	again := out.Spec.DeepCopy()
	addNodeAffinity(again, prep.NodeRequirements())
	if diff := cmp.Diff(&out.Spec, again); diff != "" {
		t.Errorf("second addNodeAffinity changed the pod (-once +twice):\n%s", diff)
	}
	if got := len(out.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions); got != 4 {
		t.Errorf("vhost-user stack: %d requirements, want 4 (cpu-manager, hugepages, seccomp, vhost-user)", got)
	}

	cfg := testConfig()
	cfg.NodeAffinity = false
	off, _, err := Inject(pod, stacks["vhost-user"], cfg)
	if err != nil {
		t.Fatal(err)
	}
	if off.Spec.Affinity != (*corev1.Affinity)(nil) {
		t.Errorf("NodeAffinity off still added %+v", off.Spec.Affinity)
	}
}

// A PCI function named by address needs a node with vfio; one from a device plugin's resource
// does not: the resource request already places the pod on a node that advertises it.
func TestVFIORequiredOnlyForAddressedFunctions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		device fsv1.PortDevice
		want   bool
	}{
		{"resource", fsv1.PortDevice{PCI: &fsv1.PCIDevice{Resource: "intel.com/sriov_dpdk"}}, false},
		{"address", fsv1.PortDevice{PCI: &fsv1.PCIDevice{Address: "0000:3b:02.0"}}, true},
		{"bond of addresses", fsv1.PortDevice{Bond: &fsv1.BondDevice{Members: []fsv1.PCIDevice{{Address: "0000:3b:02.0"}}}}, true},
		{"bond of resources", fsv1.PortDevice{Bond: &fsv1.BondDevice{Members: []fsv1.PCIDevice{{Resource: "intel.com/sriov_dpdk"}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			si := fixtures.Stack(t, "sriov")
			si.Spec.Ports[0].Device = tc.device
			if tc.device.Bond != nil {
				// Bonds work on 1.24 only, and in one process.
				si.Spec.FStackVersion, si.Spec.Processes = "1.24", 1
			}
			prep, err := Prepare(si, testConfig())
			if err != nil {
				t.Fatal(err)
			}
			got := slices.ContainsFunc(prep.NodeRequirements(), func(r corev1.NodeSelectorRequirement) bool {
				return r.Key == fsv1.NodeLabelVFIO
			})
			if got != tc.want {
				t.Errorf("vfio required = %v, want %v", got, tc.want)
			}
		})
	}
}
