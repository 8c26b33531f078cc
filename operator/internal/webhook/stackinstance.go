package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// StackInstanceValidator refuses StackInstances F-Stack cannot run, with every problem's field
// path: the rules that need the whole spec at once (port ids as DPDK assigns them, the EAL
// argument budget, address families, the flavor's limits) live in the renderer, which CEL
// cannot express. It also refuses a spec.dataplane.image the operator does not allow, and a
// spec whose snapshot would not fit in a pod's annotations (inject.MaxSpecSnapshot).
type StackInstanceValidator struct {
	// Images holds the default dataplane image and the allowed prefixes.
	Images inject.Config
	// Networks holds the ports to their DataNetworks; nil checks none (unit tests of the
	// renderer's rules only: the operator always sets it).
	Networks *NetworkChecker
}

// SetupWithManager registers the webhook.
func (v *StackInstanceValidator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &fsv1.StackInstance{}).WithValidator(v).Complete()
}

// ValidateCreate checks a new StackInstance.
func (v *StackInstanceValidator) ValidateCreate(ctx context.Context, si *fsv1.StackInstance) (admission.Warnings, error) {
	checked, err := v.validate(ctx, si)
	if err != nil {
		return nil, err
	}
	return profileWarnings(checked.Profile()), nil
}

// ValidateUpdate checks a changed StackInstance and says that running pods keep their config.
func (v *StackInstanceValidator) ValidateUpdate(ctx context.Context, old, si *fsv1.StackInstance) (admission.Warnings, error) {
	checked, err := v.validate(ctx, si)
	if err != nil {
		return nil, err
	}
	warnings := profileWarnings(checked.Profile())
	if !equality.Semantic.DeepEqual(old.Spec, si.Spec) && old.Status.BoundPods > 0 {
		warnings = append(warnings, "pods already running keep the config they started with; recreate them (e.g. kubectl rollout restart) to apply this change")
	}
	return warnings, nil
}

// ValidateDelete allows every delete.
func (v *StackInstanceValidator) ValidateDelete(context.Context, *fsv1.StackInstance) (admission.Warnings, error) {
	return nil, nil
}

// validate prepares the spec (its one defaulting and every check of the renderer) and adds the
// operator's own rules.
func (v *StackInstanceValidator) validate(ctx context.Context, si *fsv1.StackInstance) (*render.Spec, error) {
	checked, errs := render.Prepare(&si.Spec)
	if checked != nil {
		// The snapshot is the checked spec: an invalid one is refused for its errors first.
		if ferr := inject.CheckSnapshotSize(field.NewPath("spec"), checked); ferr != nil {
			errs = append(errs, ferr)
		}
		errs = append(errs, inject.CheckBindings(field.NewPath("spec"), checked)...)
		if v.Networks != nil {
			_, nerrs, err := v.Networks.Check(ctx, si.Namespace, checked.Defaulted())
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			errs = append(errs, nerrs...)
		}
	}
	if ferr := v.Images.CheckImage(field.NewPath("spec", "dataplane", "image"), si.Spec.Dataplane.Image); ferr != nil {
		errs = append(errs, ferr)
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(fsv1.GroupVersion.WithKind("StackInstance").GroupKind(), si.Name, errs)
	}
	return checked, nil
}
