package inject

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The volumes the injector adds are its own: fstack-vhost holds the pod's vhost-user sockets and
// device-info files, which OVS and the CNI plugin (root, on the host) act on, and the other
// volumes hold the pod's DPDK state, which only the dataplane and the shim's containers (through
// the mounts the injection adds) may touch. So no container of the pod may name one of them,
// whatever the pod declares. (Until the emptyDir layout, fstack-vhost was a hostPath of the
// node's whole socket root: a pod that named it reached every pod's sockets.)

// checkReserved refuses, before anything is injected, pod volumes named like the injector's and
// every mount (or device) of such a name by a container, init container or ephemeral container.
func (p *plan) checkReserved() field.ErrorList {
	var errs field.ErrorList
	ours := p.volumeNames()
	for i, v := range p.pod.Spec.Volumes {
		switch {
		case slices.Contains(ours, v.Name):
			errs = append(errs, field.Duplicate(field.NewPath("spec", "volumes").Index(i).Child("name"), v.Name))
		case slices.Contains(podcontract.InjectedVolumes(), v.Name):
			errs = append(errs, field.Forbidden(field.NewPath("spec", "volumes").Index(i).Child("name"), fmt.Sprintf(
				"%s is reserved for the volumes kube-fstack injects; rename this volume", v.Name)))
		}
	}
	return append(errs, injectedVolumeUses(&p.pod.Spec)...)
}

// CheckNewEphemeralContainers refuses ephemeral containers of pod that mount (or attach as a
// device) a volume the injector owns, except those already in old: the
// pods/ephemeralcontainers subresource never reaches the injection webhook (Pod CREATE only), so
// the validating webhook of that subresource calls this.
func CheckNewEphemeralContainers(old, pod *corev1.Pod) field.ErrorList {
	known := map[string]bool{}
	if old != nil {
		for _, c := range old.Spec.EphemeralContainers {
			known[c.Name] = true
		}
	}
	var errs field.ErrorList
	for i, c := range pod.Spec.EphemeralContainers {
		if !known[c.Name] {
			path := field.NewPath("spec", "ephemeralContainers").Index(i)
			errs = append(errs, mountErrors(path, c.VolumeMounts, c.VolumeDevices)...)
		}
	}
	return errs
}

// injectedVolumeUses lists every use of an injected volume name by the containers of spec.
func injectedVolumeUses(spec *corev1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	for i, c := range spec.InitContainers {
		errs = append(errs, mountErrors(field.NewPath("spec", "initContainers").Index(i), c.VolumeMounts, c.VolumeDevices)...)
	}
	for i, c := range spec.Containers {
		errs = append(errs, mountErrors(field.NewPath("spec", "containers").Index(i), c.VolumeMounts, c.VolumeDevices)...)
	}
	for i, c := range spec.EphemeralContainers {
		errs = append(errs, mountErrors(field.NewPath("spec", "ephemeralContainers").Index(i), c.VolumeMounts, c.VolumeDevices)...)
	}
	return errs
}

func mountErrors(path *field.Path, mounts []corev1.VolumeMount, devices []corev1.VolumeDevice) field.ErrorList {
	var errs field.ErrorList
	for j, m := range mounts {
		if slices.Contains(podcontract.InjectedVolumes(), m.Name) {
			errs = append(errs, injectedVolumeError(path.Child("volumeMounts").Index(j).Child("name"), m.Name))
		}
	}
	for j, d := range devices {
		if slices.Contains(podcontract.InjectedVolumes(), d.Name) {
			errs = append(errs, injectedVolumeError(path.Child("volumeDevices").Index(j).Child("name"), d.Name))
		}
	}
	return errs
}

func injectedVolumeError(path *field.Path, name string) *field.Error {
	return field.Forbidden(path, fmt.Sprintf(
		"%s is a volume kube-fstack injects for its dataplane; only the mounts the injection adds may use it "+
			"(the app containers get the shared DPDK volumes through the injection): remove this mount", name))
}
