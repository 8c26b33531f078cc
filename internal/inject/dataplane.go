package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// dataplaneContainer is the native sidecar running the supervisor: it starts before the app
// containers and they start only once its postStart hook saw the launcher placed.
func (p *plan) dataplaneContainer() corev1.Container {
	image := p.spec.Dataplane.Image
	if image == "" {
		image = p.cfg.Image
	}
	mounts := append(sharedMounts(), corev1.VolumeMount{
		Name: podcontract.PodInfoVolume, MountPath: podcontract.PodInfoDir, ReadOnly: true},
		// Every app container's directory, whose files the supervisor reads as hostile input.
		corev1.VolumeMount{Name: podcontract.AppStateVolume, MountPath: podcontract.AppStateDir})
	if p.vhost {
		mounts = append(mounts, corev1.VolumeMount{
			Name: podcontract.VhostVolume, MountPath: podcontract.PodSocketDir})
	}
	workDir := ""
	if p.program < 0 {
		mounts = append(mounts, scratchMounts()...)
		workDir = podcontract.DataplaneWorkDir
	}
	limits := p.dataplaneResources()
	res := corev1.ResourceRequirements{Limits: limits, Requests: limits.DeepCopy()}
	p.applyCPUPolicy(&res)
	return corev1.Container{
		Name:            podcontract.DataplaneContainer,
		Image:           image,
		ImagePullPolicy: p.cfg.ImagePullPolicy,
		RestartPolicy:   new(corev1.ContainerRestartPolicyAlways),
		Env: append([]corev1.EnvVar{
			fieldEnv(podcontract.EnvPodUID, "metadata.uid"),
			fieldEnv(podcontract.EnvPodName, "metadata.name"),
			fieldEnv(podcontract.EnvPodNamespace, "metadata.namespace"),
			fieldEnv(podcontract.EnvNodeIPs, "status.hostIPs"),
		}, append(p.cfg.logEnv(), statusTokenEnv(p.token)...)...),
		Ports:        []corev1.ContainerPort{{Name: podcontract.MetricsPortName, ContainerPort: podcontract.SupervisorPort, Protocol: corev1.ProtocolTCP}},
		Resources:    res,
		VolumeMounts: mounts,
		WorkingDir:   workDir,
		// No startup probe: it cost the pod one kubelet relist (about 1 s) before the apps
		// started. The postStart hook returns once the launcher is in the shim volume; the
		// kubelet runs it inside the container's start and starts the app containers (whose
		// command is the launcher, which holds them until the dataplane is ready) only after.
		Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{podcontract.SupervisorBinary, podcontract.WaitPlacedCommand, "--timeout=" + waitPlacedTimeout}}}},
		// Readiness long-polls (see podcontract.ProbeWait), so the pod is Ready within
		// milliseconds of the dataplane, not a period later. Liveness does not delay the apps:
		// the dataplane is the last init container, and kubelet 1.35 counts the pod initialized
		// once the last restartable init container runs (and its startup probe, if any, passed)
		// before it looks at that container's liveness. /healthz stays healthy while EAL waits
		// for a vhost-user peer, so liveness never kills a slow start.
		ReadinessProbe:           httpProbe(podcontract.ReadyzPath+podcontract.ProbeWait, 1, 3),
		LivenessProbe:            httpProbe(podcontract.HealthzPath, 5, 3),
		SecurityContext:          p.dataplaneSecurity(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// waitPlacedTimeout bounds the postStart hook. The supervisor places the launcher right after
// reading the spec and the pod's facts (milliseconds); when it fails before that it exits, and
// its hook with it. The bound only ends a supervisor stuck before placing, which the kubelet
// then restarts.
const waitPlacedTimeout = "2m"

// dataplaneResources: one exclusive CPU per F-Stack process (per lcoresPerCPU of them in the
// lab option spec.dpdk.lcoresPerCPU), the hugepages, one device per PCI
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
	out[corev1.ResourceCPU] = *resource.NewQuantity(int64(p.dataplaneCPUs()), resource.DecimalSI)
	if _, ok := out[corev1.ResourceMemory]; !ok {
		out[corev1.ResourceMemory] = p.cfg.DataplaneMemory.DeepCopy()
	}
	out[p.hugePagesResource()] = dp.HugePages.Amount.DeepCopy()
	for name, n := range p.pciResources() {
		out[corev1.ResourceName(name)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

// sharedCPUPerCPU is what the dataplane requests, under the lab's cpuPolicy Shared, for each CPU
// it would take whole under Exclusive: enough for the scheduler to count it, little enough for
// two replicas and their apps on the local cluster's two CPUs.
var sharedCPUPerCPU = resource.MustParse("100m")

// sharedCPU is the dataplane's CPU request under cpuPolicy Shared.
func (p *plan) sharedCPU() resource.Quantity {
	return *resource.NewMilliQuantity(int64(p.dataplaneCPUs())*sharedCPUPerCPU.MilliValue(), resource.DecimalSI)
}

// applyCPUPolicy turns the dataplane's whole, exclusive CPUs into a fraction under the lab's
// spec.dpdk.cpuPolicy Shared: a request without a limit, so the pod is Burstable (the static CPU
// manager leaves its containers on the shared pool) and CFS never throttles the busy-polling
// lcores, which would stall F-Stack for the rest of every period.
func (p *plan) applyCPUPolicy(res *corev1.ResourceRequirements) {
	if p.spec.DPDK.CPUPolicy != fsv1.CPUShared {
		return
	}
	delete(res.Limits, corev1.ResourceCPU)
	res.Requests[corev1.ResourceCPU] = p.sharedCPU()
}

// dataplaneCPUs is the exclusive CPUs the F-Stack processes need.
func (p *plan) dataplaneCPUs() int {
	return render.DataplaneCPUCount(int(p.spec.Processes), int(p.spec.DPDK.LcoresPerCPU))
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

// dataplaneSecurity gives the dataplane what DPDK and F-Stack need for this stack's features and
// nothing else: every capability dropped, no privilege escalation, the node agent's Localhost
// seccomp profile. It stays root (uid 0, no capability): DPDK keeps its runtime dir at
// /var/run/dpdk only for root (elsewhere for other users, where the shim and the ff_* tools,
// which use root's path, would not find it), and the primary's hugepage files, config and sockets
// in the pod's emptyDirs are files it owns, for which uid 0 needs no capability. A vhost-user
// stack needs no capability at all: virtio_user speaks to a unix socket, the memory is hugetlbfs
// files, and without a PCI device EAL uses IOVA as VA (no /proc/self/pagemap). So such a pod
// meets Pod Security "baseline".
func (p *plan) dataplaneSecurity() *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		RunAsUser:                new(int64(0)),
		RunAsNonRoot:             new(false),
		AllowPrivilegeEscalation: new(false),
		// The runtime's default profile lets only holders of SYS_NICE call get_mempolicy,
		// set_mempolicy and mbind, with which a NUMA-aware EAL (F-Stack's bundled DPDK,
		// Debian's) places each hugepage segment on its socket; without them EAL's first
		// allocation fails ("set_mempolicy: Operation not permitted", then ENOMEM). The
		// Localhost profile is that default with those three calls allowed, so the container
		// needs no SYS_NICE, which "baseline" forbids and which would also let it renice or
		// re-pin other processes. The node agent installs it; the node label
		// NodeLabelSeccomp keeps the pod off nodes without it.
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost,
			LocalhostProfile: new(podcontract.SeccompLocalhostProfile)},
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: p.dataplaneCapabilities()},
	}
	// shareProcessNamespace lets every root container of the pod reach the dataplane's root
	// filesystem through /proc/<pid>/root; read-only, it offers nothing to write there (its
	// volumes stay writable: docs/security.md). What the supervisor, DPDK and F-Stack write
	// goes to the scratch volume's mounts. A program container (spec.program) keeps its image's
	// writable root: its program's own files (Nginx's logs, pid and temp directories) are the
	// user's to place.
	if p.program < 0 {
		sc.ReadOnlyRootFilesystem = new(true)
	}
	return sc
}

// dataplaneCapabilities are the capabilities beyond "baseline" that the stack's features need;
// none for a vhost-user stack.
func (p *plan) dataplaneCapabilities() []corev1.Capability {
	var caps []corev1.Capability
	if slices.ContainsFunc(p.spec.Ports, func(port fsv1.PortSpec) bool { return port.Device.PCI != nil || port.Device.Bond != nil }) {
		// PCI ports (a VF or NIC bound to vfio-pci, device nodes from the device plugin): VFIO's
		// DMA mapping pins every page of the mempools, which counts against RLIMIT_MEMLOCK unless
		// the process holds IPC_LOCK.
		caps = append(caps, "IPC_LOCK")
	}
	if p.spec.KNI != nil && p.spec.KNI.Enabled {
		// KNI (v1.25: virtio_user over /dev/vhost-net): F-Stack creates and configures the tap
		// veth<port> in the pod's network namespace (TUNSETIFF, address, link up), which needs
		// NET_ADMIN. The /dev/vhost-net and /dev/net/tun device nodes are not a capability: a
		// device plugin must give them (spec.dataplane.resources).
		caps = append(caps, "NET_ADMIN")
	}
	return caps
}
