package inject

import (
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/fixtures"
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
		{name: "label removed", label: ptr(""), want: []string{"metadata.labels[kubefstack.io/stack]"}},
		{name: "label changed", label: ptr("other"), want: []string{"metadata.labels[kubefstack.io/stack]"}},
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
