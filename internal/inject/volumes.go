package inject

import (
	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

func (p *plan) volumeNames() []string {
	names := []string{podcontract.HugePagesVolume, podcontract.DPDKRuntimeVolume, podcontract.ShimVolume, podcontract.AppStateVolume, podcontract.PodInfoVolume}
	if p.vhost {
		names = append(names, podcontract.VhostVolume)
	}
	if p.program < 0 {
		names = append(names, podcontract.DataplaneScratchVolume)
	}
	return names
}

func (p *plan) volumes() []corev1.Volume {
	vols := []corev1.Volume{
		{Name: podcontract.HugePagesVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: p.hugePagesMedium()}}},
		{Name: podcontract.DPDKRuntimeVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: podcontract.ShimVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: podcontract.AppStateVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: podcontract.PodInfoVolume, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: podInfoItems()}}},
	}
	if p.vhost {
		// The kubelet's, so it goes with the pod and what the pod planted in it too; the CNI
		// plugin reaches it from the host through a link of its own (cni/README.md).
		vols = append(vols, corev1.Volume{Name: podcontract.VhostVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	if p.program < 0 {
		vols = append(vols, corev1.Volume{Name: podcontract.DataplaneScratchVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return vols
}

// scratchMounts are the dataplane container's writable places beside its volumes (its root
// filesystem is read-only), one subPath of the scratch emptyDir each.
func scratchMounts() []corev1.VolumeMount {
	return []corev1.VolumeMount{
		{Name: podcontract.DataplaneScratchVolume, MountPath: podcontract.DataplaneConfigDir, SubPath: "etc-f-stack"},
		{Name: podcontract.DataplaneScratchVolume, MountPath: podcontract.DataplaneTmpDir, SubPath: "tmp"},
		{Name: podcontract.DataplaneScratchVolume, MountPath: podcontract.DataplaneWorkDir, SubPath: "log"},
	}
}

func podInfoItems() []corev1.DownwardAPIVolumeFile {
	item := func(file, path string) corev1.DownwardAPIVolumeFile {
		return corev1.DownwardAPIVolumeFile{Path: file, FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	return []corev1.DownwardAPIVolumeFile{
		item(podcontract.PodInfoSpec, "metadata.annotations['"+podcontract.SpecAnnotation+"']"),
		item(podcontract.PodInfoSpecVersion, "metadata.annotations['"+podcontract.SpecVersionAnnotation+"']"),
		item(podcontract.PodInfoConfigHash, "metadata.annotations['"+podcontract.ConfigHashAnnotation+"']"),
		item(podcontract.PodInfoStack, "metadata.labels['"+fsv1.StackLabel+"']"),
		item(podcontract.PodInfoName, "metadata.name"),
		item(podcontract.PodInfoNamespace, "metadata.namespace"),
		item(podcontract.PodInfoUID, "metadata.uid"),
		item(podcontract.PodInfoLabels, "metadata.labels"),
	}
}

// sharedMounts are what every DPDK process of the pod must see at identical paths: secondaries
// reopen the primary's hugepage files by the recorded path and find it through the runtime dir.
func sharedMounts() []corev1.VolumeMount {
	return []corev1.VolumeMount{
		{Name: podcontract.HugePagesVolume, MountPath: podcontract.HugePagesDir},
		{Name: podcontract.DPDKRuntimeVolume, MountPath: podcontract.DPDKRuntimeDir},
		{Name: podcontract.ShimVolume, MountPath: podcontract.ShimDir},
	}
}
