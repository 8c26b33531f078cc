package inject

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// dataplaneContainer is the native sidecar running the supervisor: it starts before the app
// containers and they start only once its startup probe passes.
func (p *plan) dataplaneContainer() corev1.Container {
	image := p.spec.Dataplane.Image
	if image == "" {
		image = p.cfg.Image
	}
	mounts := append(sharedMounts(), corev1.VolumeMount{
		Name: podcontract.PodInfoVolume, MountPath: podcontract.PodInfoDir, ReadOnly: true})
	if p.vhost {
		mounts = append(mounts, corev1.VolumeMount{
			Name: podcontract.VhostVolume, MountPath: podcontract.PodSocketDir, SubPathExpr: "$(" + podcontract.EnvPodUID + ")"})
	}
	limits := p.dataplaneResources()
	return corev1.Container{
		Name:            podcontract.DataplaneContainer,
		Image:           image,
		ImagePullPolicy: p.cfg.ImagePullPolicy,
		RestartPolicy:   ptr(corev1.ContainerRestartPolicyAlways),
		Env: []corev1.EnvVar{
			fieldEnv(podcontract.EnvPodUID, "metadata.uid"),
			fieldEnv(podcontract.EnvPodName, "metadata.name"),
			fieldEnv(podcontract.EnvPodNamespace, "metadata.namespace"),
		},
		Ports: []corev1.ContainerPort{{Name: "fstack-metrics", ContainerPort: podcontract.SupervisorPort, Protocol: corev1.ProtocolTCP}},
		Resources: corev1.ResourceRequirements{
			Limits: limits, Requests: limits.DeepCopy(),
		},
		VolumeMounts: mounts,
		// The startup probe passes as soon as the launcher is in the shim volume (the app
		// containers exec it, and it holds them until the dataplane is ready), so the kubelet
		// starts the apps beside EAL's init rather than after it. Both probes long-poll (see
		// podcontract.ProbeWait): with plain probes, an injected pod's create-to-Ready was 2.5x
		// the plain pod's (make bench-cluster). /healthz stays healthy while EAL waits for a
		// vhost-user peer, so liveness never kills a slow start.
		StartupProbe:   httpProbe(podcontract.StartedzPath+podcontract.ProbeWait, 1, 300),
		ReadinessProbe: httpProbe(podcontract.ReadyzPath+podcontract.ProbeWait, 1, 3),
		LivenessProbe:  httpProbe(podcontract.HealthzPath, 5, 3),
		SecurityContext: &corev1.SecurityContext{
			// DPDK keeps its runtime dir and hugepage files as root; IPC_LOCK lets it lock its
			// memory. Nothing more: vhost-user needs no device access and no privilege.
			RunAsUser:    ptr(int64(0)),
			RunAsNonRoot: ptr(false),
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"IPC_LOCK"}},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// dataplaneResources: one exclusive CPU per F-Stack process, the hugepages, one device per PCI
// port of an SR-IOV resource, and whatever else the StackInstance adds, as limits that equal
// requests (Guaranteed).
func (p *plan) dataplaneResources() corev1.ResourceList {
	dp := p.spec.Dataplane
	out := corev1.ResourceList{}
	for name, q := range dp.Resources.Requests {
		out[name] = q.DeepCopy()
	}
	for name, q := range dp.Resources.Limits {
		out[name] = q.DeepCopy()
	}
	out[corev1.ResourceCPU] = *resource.NewQuantity(int64(p.spec.Processes), resource.DecimalSI)
	if _, ok := out[corev1.ResourceMemory]; !ok {
		out[corev1.ResourceMemory] = p.cfg.DataplaneMemory.DeepCopy()
	}
	out[p.hugePagesResource()] = dp.HugePages.Amount.DeepCopy()
	for name, n := range p.pciResources() {
		out[corev1.ResourceName(name)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

// pciResources counts the devices each SR-IOV resource must give the pod.
func (p *plan) pciResources() map[string]int64 {
	n := map[string]int64{}
	for i := range p.spec.Ports {
		d := p.spec.Ports[i].Device
		if d.PCI != nil && d.PCI.Resource != "" {
			n[d.PCI.Resource]++
		}
		if d.Bond != nil {
			for _, m := range d.Bond.Members {
				if m.Resource != "" {
					n[m.Resource]++
				}
			}
		}
	}
	return n
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func httpProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(podcontract.SupervisorPort)}},
		PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 1,
	}
}
