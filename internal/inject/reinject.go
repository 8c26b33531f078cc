package inject

import (
	"cmp"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
)

// A pod that arrives already carrying the status annotation is not injected again (a copy of an
// injected pod, kubectl debug --copy-to, a re-applied manifest), but the annotation is only a
// string anyone may write: such a pod could declare fstack-vhost as a hostPath of the node's
// socket root (the layout before the emptyDir) or of anything else. Its pod-local volumes
// (emptyDirs, the downward API) reach nothing outside the pod; fstack-vhost must be exactly what
// the injection makes of it. Nor may the claim skip the dataplane image allow-list: the
// dataplane container's image is checked as if the injection had chosen it.

// CheckAlreadyInjected refuses an already injected pod whose fstack-vhost differs from the
// injection's (an emptyDir, mounted only by the dataplane container), or whose dataplane
// container runs an image outside the allow-list.
func CheckAlreadyInjected(pod *corev1.Pod, cfg Config) field.ErrorList {
	errs := checkDataplaneImages(pod, cfg)
	for i, v := range pod.Spec.Volumes {
		if v.Name == podcontract.VhostVolume && (v.EmptyDir == nil || v.HostPath != nil) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "volumes").Index(i), fmt.Sprintf(
				"%s must be the emptyDir the injection makes; remove the %s annotation and the injected parts, and let the injection add them",
				v.Name, "kubefstack.io/status")))
		}
	}
	check := func(path *field.Path, c *corev1.Container) {
		for j, m := range c.VolumeMounts {
			if m.Name == podcontract.VhostVolume && !isDataplaneVhostMount(c, m) {
				errs = append(errs, injectedVolumeError(path.Child("volumeMounts").Index(j).Child("name"), m.Name))
			}
		}
		for j, d := range c.VolumeDevices {
			if d.Name == podcontract.VhostVolume {
				errs = append(errs, injectedVolumeError(path.Child("volumeDevices").Index(j).Child("name"), d.Name))
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		check(field.NewPath("spec", "initContainers").Index(i), &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		check(field.NewPath("spec", "containers").Index(i), &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		c := corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		check(field.NewPath("spec", "ephemeralContainers").Index(i), &c)
	}
	return errs
}

// isDataplaneVhostMount: the dataplane's mount of the pod's own socket directory.
func isDataplaneVhostMount(c *corev1.Container, _ corev1.VolumeMount) bool {
	return c.Name == podcontract.DataplaneContainer
}

// checkDataplaneImages applies the allow-list to every container named as the dataplane.
func checkDataplaneImages(pod *corev1.Pod, cfg Config) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		path       *field.Path
		containers []corev1.Container
	}{{field.NewPath("spec", "initContainers"), pod.Spec.InitContainers}, {field.NewPath("spec", "containers"), pod.Spec.Containers}} {
		for i, c := range list.containers {
			if c.Name != podcontract.DataplaneContainer {
				continue
			}
			if ferr := cfg.CheckImage(list.path.Index(i).Child("image"), c.Image); ferr != nil {
				errs = append(errs, ferr)
			}
		}
	}
	return errs
}

// InjectedAddressNeeds are the addresses an already injected pod serves of its own, read from its
// spec snapshot (a static address, or a pool's pinned one): a copy of a running pod, or a
// workload `kubectl fstack inject` wrote, carries them, and only an admission claims them. Each
// is a static need on its port's network (the snapshot's dataNetwork, or defaultNetwork); the
// snapshot comes with them, for the network's checks. A pod without a snapshot it can decode
// needs nothing here: its supervisor refuses to start on it.
func InjectedAddressNeeds(pod *corev1.Pod, defaultNetwork string) ([]AddressNeed, *fsv1.StackInstanceSpec) {
	raw, ok := pod.Annotations[podcontract.SpecAnnotation]
	if !ok {
		return nil, nil
	}
	spec, err := snapshot.Decode([]byte(raw), pod.Annotations[podcontract.SpecVersionAnnotation])
	if err != nil {
		return nil, nil
	}
	var needs []AddressNeed
	for i := range spec.Ports {
		p := &spec.Ports[i]
		for _, v4 := range []bool{true, false} {
			pfx, family, ok := ownAddress(&p.Addressing, v4)
			if !ok {
				continue
			}
			needs = append(needs, AddressNeed{Port: i, PortName: p.Name, Network: cmp.Or(p.DataNetwork, defaultNetwork),
				Field: field.NewPath("spec", "ports").Index(i).Child(family).String(), Static: pfx})
		}
	}
	return needs, spec
}

// ownAddress is the address of a snapshot's IPv4 (v4) or IPv6 that the pod serves of its own:
// not one the attachment's IPAM gives.
func ownAddress(a *fsv1.Addressing, v4 bool) (netip.Prefix, string, bool) {
	from, addr, family := fsv1.AddressSource(""), "", "ipv6"
	switch {
	case v4 && a.IPv4 != nil:
		from, addr, family = a.IPv4.From, a.IPv4.Address, "ipv4"
	case !v4 && a.IPv6 != nil:
		from, addr = a.IPv6.From, a.IPv6.Address
	}
	pfx, err := netip.ParsePrefix(addr)
	return pfx, family, err == nil && from != fsv1.AddressAttachment
}
