package inject

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// CheckPodUpdate refuses the two changes to a running injected pod that would undo what
// admission decided (a pod's volumes and mounts are immutable, its images and labels are not):
//   - a new image for the dataplane container outside the allowed images: the injection checked
//     spec.dataplane.image, `kubectl set image` would bypass it;
//   - removing or changing the stack label: every webhook of kube-fstack selects pods by it, so
//     without it an ephemeral container could mount the injected volumes unchecked;
//   - adding, changing or removing the spec snapshot, its API version or the served addresses
//     (specAnnotations): the dataplane runs what admission checked, and reads the version
//     before the spec; the addresses are the ones admission claimed for the pod.
//
// A pod counts as injected by any mark of it (claimsInjection): the status annotation, which
// anyone creating a pod may write, an injected volume or a dataplane container. The image check
// does not depend on it at all: a container named as the dataplane runs an allowed image.
func CheckPodUpdate(old, pod *corev1.Pod, cfg Config) field.ErrorList {
	var errs field.ErrorList
	if was, now := old.Labels[fsv1.StackLabel], pod.Labels[fsv1.StackLabel]; was != now && claimsInjection(old) {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "labels").Key(fsv1.StackLabel), fmt.Sprintf(
			"an injected pod keeps its StackInstance label (%q); delete the pod to change it", was)))
	}
	for _, k := range specAnnotations() {
		if old.Annotations[k] != pod.Annotations[k] && claimsInjection(old) {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(k),
				"an injected pod keeps the StackInstance spec it was admitted with; re-create the pod to run another"))
		}
	}
	// A program's dataplane (spec.program) is a regular container of the same name.
	for _, list := range []struct {
		path     *field.Path
		old, now []corev1.Container
	}{{field.NewPath("spec", "initContainers"), old.Spec.InitContainers, pod.Spec.InitContainers},
		{field.NewPath("spec", "containers"), old.Spec.Containers, pod.Spec.Containers}} {
		for i, c := range list.now {
			if c.Name != podcontract.DataplaneContainer || i >= len(list.old) || list.old[i].Image == c.Image {
				continue
			}
			if ferr := cfg.CheckImage(list.path.Index(i).Child("image"), c.Image); ferr != nil {
				errs = append(errs, ferr)
			}
		}
	}
	return errs
}

// claimsInjection says whether pod carries any mark of the injection.
func claimsInjection(pod *corev1.Pod) bool {
	isDataplane := func(c corev1.Container) bool { return c.Name == podcontract.DataplaneContainer }
	return pod.Annotations[fsv1.StatusAnnotation] != "" ||
		slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
			return slices.Contains(podcontract.InjectedVolumes(), v.Name)
		}) ||
		slices.ContainsFunc(pod.Spec.InitContainers, isDataplane) || slices.ContainsFunc(pod.Spec.Containers, isDataplane)
}

// specAnnotations are the annotations an injected pod keeps as admission wrote them: the spec
// snapshot, the API version that wrote it, and the addresses the pod serves (its claims, and
// what EndpointSlices publish).
func specAnnotations() []string {
	return []string{podcontract.SpecAnnotation, podcontract.SpecVersionAnnotation, podcontract.AddressesAnnotation}
}
