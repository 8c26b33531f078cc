package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

func TestCheckPodUpdate(t *testing.T) {
	stacks := fixtures.Stacks(t)
	cfg := testConfig()
	cfg.AllowedImages = []string{"registry.example/kube-fstack/"}
	old, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost"), stacks["vhost-user"], cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		image string
		label *string
		want  []string
	}{
		{name: "nothing", want: nil},
		{name: "allowed image", image: "registry.example/kube-fstack/dataplane:v2"},
		{name: "the default image", image: cfg.Image},
		{name: "other image", image: "evil.example/dp:1", want: []string{"spec.initContainers[0].image"}},
		{name: "label removed", label: new(""), want: []string{"metadata.labels[kubefstack.io/stack]"}},
		{name: "label changed", label: new("other"), want: []string{"metadata.labels[kubefstack.io/stack]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := old.DeepCopy()
			if tc.image != "" {
				pod.Spec.InitContainers[0].Image = tc.image
			}
			if tc.label != nil {
				pod.Labels[fsv1.StackLabel] = *tc.label
				if *tc.label == "" {
					delete(pod.Labels, fsv1.StackLabel)
				}
			}
			errs := CheckPodUpdate(old, pod, cfg)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %v, want errors at %v", errs, tc.want)
			}
			for i, e := range errs {
				if e.Field != tc.want[i] {
					t.Errorf("error at %s, want %s", e.Field, tc.want[i])
				}
			}
		})
	}
	plain := fixtures.LoadPod(t, "nginx-vhost")
	changed := plain.DeepCopy()
	delete(changed.Labels, fsv1.StackLabel)
	if errs := CheckPodUpdate(plain, changed, cfg); len(errs) != 0 {
		t.Fatalf("a pod that was never injected may change freely: %v", errs)
	}
}

// The spec snapshot and its API version stay as admission wrote them: an editor of the pod who
// changed either would have the dataplane run a spec admission never saw, or refuse to start.
func TestCheckPodUpdateKeepsTheSpecAndItsVersion(t *testing.T) {
	cfg := testConfig()
	old, _, err := Inject(fixtures.LoadPod(t, "nginx-vhost"), fixtures.Stacks(t)["vhost-user"], cfg)
	if err != nil {
		t.Fatal(err)
	}
	if old.Annotations[podcontract.SpecVersionAnnotation] != "kubefstack.io/v1alpha1" {
		t.Fatalf("the injection wrote %s %q, want kubefstack.io/v1alpha1", podcontract.SpecVersionAnnotation, old.Annotations[podcontract.SpecVersionAnnotation])
	}
	for _, tc := range []struct {
		name, key string
		value     *string // nil removes it
	}{
		{"spec changed", podcontract.SpecAnnotation, new(`{"processes":8}`)},
		{"spec removed", podcontract.SpecAnnotation, nil},
		{"version changed", podcontract.SpecVersionAnnotation, new("kubefstack.io/v1")},
		{"version removed", podcontract.SpecVersionAnnotation, nil},
		// Issue 30: the served addresses are the ones admission claimed; EndpointSlices publish them.
		{"addresses changed", podcontract.AddressesAnnotation, new("0=10.99.0.77")},
		{"addresses removed", podcontract.AddressesAnnotation, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := old.DeepCopy()
			delete(pod.Annotations, tc.key)
			if tc.value != nil {
				pod.Annotations[tc.key] = *tc.value
			}
			errs := CheckPodUpdate(old, pod, cfg)
			if want := "metadata.annotations[" + tc.key + "]"; len(errs) != 1 || errs[0].Field != want {
				t.Fatalf("got %v, want one error at %s", errs, want)
			}
		})
	}
	plain := fixtures.LoadPod(t, "nginx-vhost")
	changed := plain.DeepCopy()
	changed.Annotations = map[string]string{podcontract.SpecVersionAnnotation: "x"}
	if errs := CheckPodUpdate(plain, changed, cfg); len(errs) != 0 {
		t.Fatalf("a pod that was never injected may change freely: %v", errs)
	}
}

// Issue 23: a forged status annotation claims an injection that never happened. The claim
// neither skips the dataplane image allow-list nor lets the pod drop its stack label later.
func TestForgedStatusKeepsTheRules(t *testing.T) {
	cfg := testConfig()
	cfg.AllowedImages = []string{"registry.example/kube-fstack/"}
	forged := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithAnnotation(fsv1.StatusAnnotation, `{"stack":"vhost-user"}`))
	forged.Spec.InitContainers = append(forged.Spec.InitContainers, corev1.Container{
		Name: podcontract.DataplaneContainer, Image: "registry.example:31337/kube-fstack/dataplane:v1",
	})
	if d := Decide(forged); d != SkippedAlreadyInjected {
		t.Fatalf("the forged pod is %s, want %s", d, SkippedAlreadyInjected)
	}
	errs := CheckAlreadyInjected(forged, cfg)
	if len(errs) != 1 || errs[0].Field != "spec.initContainers[0].image" {
		t.Fatalf("want the dataplane image refused at spec.initContainers[0].image, got %v", errs)
	}
	if _, _, err := Inject(forged, fixtures.Stacks(t)["vhost-user"], cfg); err == nil {
		t.Fatal("Inject passed the forged pod through with a disallowed dataplane image")
	}

	for name, old := range map[string]*corev1.Pod{
		"status annotation only": fixtures.LoadPod(t, "nginx-vhost", fixtures.WithAnnotation(fsv1.StatusAnnotation, "{}")),
		"dataplane container only": fixtures.LoadPod(t, "nginx-vhost", fixtures.WithContainer(corev1.Container{
			Name: podcontract.DataplaneContainer, Image: "registry.example/kube-fstack/dataplane:v1",
		})),
	} {
		dropped := old.DeepCopy()
		delete(dropped.Labels, fsv1.StackLabel)
		errs := CheckPodUpdate(old, dropped, cfg)
		if len(errs) != 1 || errs[0].Field != "metadata.labels[kubefstack.io/stack]" {
			t.Errorf("%s: want the label drop refused at metadata.labels[kubefstack.io/stack], got %v", name, errs)
		}
	}
}
