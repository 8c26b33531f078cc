package envtest

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// With --allowed-dataplane-images set, the API server refuses a StackInstance whose
// spec.dataplane.image is outside the allowed prefixes (a prefix ends at a component boundary),
// on create and on update, and stores nothing; images under a prefix, and the default, pass.
func TestDataplaneImageAllowList(t *testing.T) {
	ctx := context.Background()
	for _, image := range []string{"evil.example/fstack/dataplane:v1", "registry.example/fstack-evil/dataplane:v1"} {
		si := stack(t, "vhost-user", "image-refused")
		si.Spec.Dataplane.Image = image
		err := k8s.Create(ctx, si)
		wantErr(t, err, "spec.dataplane.image: Invalid value", image, allowedImages, "--allowed-dataplane-images")
		if !apierrors.IsInvalid(err) {
			t.Fatalf("want an Invalid status, got %v", err)
		}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: si.Name}, &fsv1.StackInstance{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a refused StackInstance was stored: %v", err)
		}
	}
	si := stack(t, "vhost-user", "image-allowed")
	si.Spec.Dataplane.Image = allowedImages + "dataplane:v1.25"
	if err := k8s.Create(ctx, si); err != nil {
		t.Fatalf("an allowed image was refused: %v", err)
	}
	wantErr(t, setImage(ctx, si.Name, "evil.example/fstack/dataplane:v1"), "spec.dataplane.image: Invalid value")
	if err := setImage(ctx, si.Name, ""); err != nil { // the operator's default
		t.Fatalf("the default image was refused: %v", err)
	}
}

// setImage updates the stored StackInstance's image, retrying when the controller's status
// update got there first.
func setImage(ctx context.Context, name, image string) error {
	for {
		si := &fsv1.StackInstance{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: name}, si); err != nil {
			return err
		}
		si.Spec.Dataplane.Image = image
		if err := k8s.Update(ctx, si); !apierrors.IsConflict(err) {
			return err
		}
	}
}
