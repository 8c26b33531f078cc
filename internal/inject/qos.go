package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkGuaranteed refuses pods that cannot be Guaranteed QoS. Only a Guaranteed pod gets
// exclusive CPUs from kubelet's static CPU manager, and F-Stack's busy-polling lcores need them.
// The app's resources are the user's to choose, so they are checked, never invented.
// The program container (index program, -1 for none) gets its CPUs and memory from the
// injection, so only its values that conflict are refused (program.go).
func checkGuaranteed(spec *corev1.PodSpec, program int) field.ErrorList {
	var errs field.ErrorList
	for i := range spec.InitContainers {
		errs = append(errs, checkContainerQoS(&spec.InitContainers[i], field.NewPath("spec", "initContainers").Index(i))...)
	}
	for i := range spec.Containers {
		if i == program {
			continue
		}
		errs = append(errs, checkContainerQoS(&spec.Containers[i], field.NewPath("spec", "containers").Index(i))...)
	}
	return errs
}

func checkContainerQoS(c *corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	res := path.Child("resources")
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		limit, ok := c.Resources.Limits[name]
		if !ok || limit.IsZero() {
			errs = append(errs, field.Required(res.Child("limits").Key(string(name)), fmt.Sprintf(
				"container %q needs a %s limit: the pod must be Guaranteed QoS so kubelet's static CPU manager gives the dataplane exclusive CPUs (requests default to limits)", c.Name, name)))
			continue
		}
		if req, ok := c.Resources.Requests[name]; ok && req.Cmp(limit) != 0 {
			errs = append(errs, field.Invalid(res.Child("requests").Key(string(name)), req.String(), fmt.Sprintf(
				"container %q requests %s of %s but its limit is %s: requests must equal limits for Guaranteed QoS, which the dataplane's exclusive CPUs need", c.Name, req.String(), name, limit.String())))
		}
	}
	return errs
}
