package envtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/controller"
)

// The CRD's OpenAPI schema and CEL rules refuse what a single object shows is wrong.
func TestSchemaAndCELRefuseBadSpecs(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*fsv1.StackInstanceSpec)
		want   []string
	}{
		{"processes-zero", func(s *fsv1.StackInstanceSpec) { s.Processes = -1 }, []string{"spec.processes", "greater than or equal to 1"}},
		{"vlan-unknown-port", func(s *fsv1.StackInstanceSpec) {
			s.VLANs = []fsv1.VLANSpec{{ID: 10, Port: "nope"}}
		}, []string{"spec.vlans: ", `spec.vlans[0].port: "nope" names no entry of spec.ports`}},
		{"rss-check-unknown-port", func(s *fsv1.StackInstanceSpec) {
			s.RSSCheck = &fsv1.RSSCheckSpec{Entries: []fsv1.RSSCheckEntry{
				{Port: s.Ports[0].Name, LocalAddress: "10.0.0.1", RemoteAddress: "10.0.0.2", RemotePort: 80},
				{Port: "nope", LocalAddress: "10.0.0.1", RemoteAddress: "10.0.0.2", RemotePort: 80}}}
		}, []string{"spec.rssCheck.entries: ", `spec.rssCheck.entries[1].port: "nope" names no entry of spec.ports`}},
		{"port-process-out-of-range", func(s *fsv1.StackInstanceSpec) {
			s.Processes, s.Ports[0].Processes = 2, []int32{0, 1, 7}
		}, []string{"spec.ports: ", "spec.ports[0].processes[2]: no such process: spec.processes is 2"}},
		{"kni-without-method", func(s *fsv1.StackInstanceSpec) {
			s.KNI = &fsv1.KNISpec{Enabled: true}
		}, []string{"spec.kni.method: Required value: method is required"}},
		{"polling-with-kernel-event", func(s *fsv1.StackInstanceSpec) {
			s.Shim.Polling, s.Shim.KernelEvent = true, new(true)
		}, []string{"spec.shim.polling: ", "polling and kernelEvent cannot be combined"}},
		{"multicast-mac", func(s *fsv1.StackInstanceSpec) { s.Ports[0].Device.VhostUser.MAC = "01:00:5e:00:00:01" },
			[]string{"spec.ports[0].device.vhostUser.mac", "a multicast MAC"}},
		{"page-size", func(s *fsv1.StackInstanceSpec) { s.Dataplane.HugePages.PageSize = "4Mi" }, []string{"spec.dataplane.hugePages.pageSize", "Unsupported value"}},
		{"program-with-shim", func(s *fsv1.StackInstanceSpec) {
			s.Program, s.Shim.KernelEvent = &fsv1.ProgramSpec{Mode: fsv1.ProgramPerProcess}, new(true)
		}, []string{"spec.shim", "a program linked with libfstack uses no shim"}},
		{"program-mode", func(s *fsv1.StackInstanceSpec) { s.Program = &fsv1.ProgramSpec{Mode: "Forking"} }, []string{"spec.program.mode", "Unsupported value"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			si := stack(t, "vhost-user", "bad-"+c.name)
			c.mutate(&si.Spec)
			wantErr(t, k8s.Create(context.Background(), si), c.want...)
		})
	}
}

// The validating webhook refuses what only the whole spec shows, with field paths, and a
// refused StackInstance is not stored.
func TestWebhookRefusesCrossFieldErrors(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "nginx-shim", "two-ports-one-device")
	second := si.Spec.Ports[0].DeepCopy()
	second.Name = "second"
	second.IPv4.Address = "192.168.2.2/24"
	second.IPv4.Gateway = "192.168.2.1"
	si.Spec.Ports = append(si.Spec.Ports, *second)
	err := k8s.Create(ctx, si)
	wantErr(t, err, "admission webhook", "spec.ports[1].device.pci", "Duplicate value")
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid status so kubectl lists the fields, got %v", err)
	}
	got := &fsv1.StackInstance{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: si.Name}, got); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused StackInstance was stored: %v", err)
	}
	// An update that breaks a stored StackInstance is refused too, and the stored spec stays.
	ok := stack(t, "nginx-shim", "update-refused")
	testenv.CreateIfAbsent(t, k8s, ok)
	broken := ok.DeepCopy()
	broken.Spec.Ports = append(broken.Spec.Ports, *second)
	// A merge patch, not an update: the controller's status writes move resourceVersion on.
	wantErr(t, k8s.Patch(ctx, broken, client.MergeFrom(ok)), "spec.ports[1].device.pci")
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: ok.Name}, got); err != nil || len(got.Spec.Ports) != 1 {
		t.Fatalf("the stored StackInstance changed: %v, %d ports", err, len(got.Spec.Ports))
	}
}

// The webhook refuses what is accepted field by field but broken on the node (issue 32): two
// vhost-user ports on one attachment, one address on two interfaces, a VIP that is an
// interface's address; each names the field to change and the other one involved.
func TestWebhookRefusesSharedAttachmentsAndAddresses(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*fsv1.StackInstanceSpec)
		want   []string
	}{
		{"vhost-user-attachment-twice", func(s *fsv1.StackInstanceSpec) {
			second := s.Ports[0].DeepCopy()
			second.Name = "second"
			second.IPv4.Address, second.IPv4.Gateway = "10.98.0.10/24", "10.98.0.1"
			s.Ports = append(s.Ports, *second)
		}, []string{"spec.ports[1].attachment", "vhost-user ports data and second both use attachment net1"}},
		{"address-twice", func(s *fsv1.StackInstanceSpec) {
			s.VLANs = []fsv1.VLANSpec{{ID: 10, Port: s.Ports[0].Name, Addressing: fsv1.Addressing{
				IPv4: &fsv1.IPv4Address{Address: "10.99.0.10/28", Gateway: "10.99.0.1"}}}}
		}, []string{"spec.vlans[0].ipv4.address", "also the address of spec.ports[0].ipv4.address"}},
		{"vip-is-the-port-address", func(s *fsv1.StackInstanceSpec) {
			s.Ports[0].VIPs = []string{"10.99.0.10"}
		}, []string{"spec.ports[0].vips[0]", "is the address of spec.ports[0].ipv4.address"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			si := stack(t, "vhost-user", "bad-"+c.name)
			c.mutate(&si.Spec)
			err := k8s.Create(context.Background(), si)
			wantErr(t, err, append([]string{"admission webhook"}, c.want...)...)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid status so kubectl lists the fields, got %v", err)
			}
		})
	}
}

// The controller marks a StackInstance Valid, writes its ConfigMap with exactly the renderer's
// output, and says that no pod is bound yet.
func TestControllerValidAndConfigMap(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "configmap")
	testenv.CreateIfAbsent(t, k8s, si)
	checked, errs := render.Prepare(&si.Spec)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	hash := render.ConfigHash(checked.Placeholder().Config)
	want, err := controller.ConfigMapData(checked, hash)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		got := &fsv1.StackInstance{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: si.Name}, got); err != nil {
			return err
		}
		valid := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionValid)
		ready := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionReady)
		switch {
		case valid == nil || valid.Status != metav1.ConditionTrue:
			return fmt.Errorf("Valid condition %+v", valid)
		case ready == nil || ready.Reason != fsv1.ReasonNoBoundPods:
			return fmt.Errorf("Ready condition %+v", ready)
		case got.Status.ObservedGeneration != got.Generation || got.Status.ConfigHash != hash:
			return fmt.Errorf("status %+v, want generation %d hash %s", got.Status, got.Generation, hash)
		}
		return nil
	})
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: controller.ConfigMapName(si.Name)}, cm); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, cm.Data); diff != "" {
		t.Fatalf("ConfigMap differs from the renderer's output (-want +got):\n%s", diff)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].Name != si.Name || cm.OwnerReferences[0].Controller == nil {
		t.Fatalf("ConfigMap is not owned by the StackInstance: %+v", cm.OwnerReferences)
	}
}

// An Upstream image with a vhost-user port and only an amount of hugepages (issue 20) is admitted
// by the real API server and the webhook, and the controller renders it with 1Gi pages: the page
// size depends on the flavor and the devices, so the CRD sets no default for it. Before, the
// CRD's static 2Mi default made the webhook refuse what `kubectl fstack render` accepted.
func TestUpstreamVhostUserAdmittedWithGigPages(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "upstream-vhost", "upstream-vhost")
	if err := k8s.Create(ctx, si); err != nil {
		t.Fatalf("the cluster refuses what kubectl fstack render renders: %v", err)
	}
	stored := &fsv1.StackInstance{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: si.Name}, stored); err != nil {
		t.Fatal(err)
	}
	checked, errs := render.Prepare(&stored.Spec)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if got := checked.Defaulted().Dataplane.HugePages.PageSize; got != fsv1.HugePages1Gi {
		t.Fatalf("the stored StackInstance renders with %s pages, want 1Gi", got)
	}
}
