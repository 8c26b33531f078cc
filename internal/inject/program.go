package inject

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// A StackInstance with spec.program runs a program linked with libfstack (F-Stack's Nginx,
// or any program that calls ff_init) as its F-Stack processes. Such a program needs no adapter
// and no shim, so there is no app container to wrap: the pod's program container becomes the
// dataplane. It keeps its image, command, arguments, environment, ports and volume mounts; its
// command runs under the image's entrypoint, fstack-supervisor (kube-fstack's dataplane image,
// or one built FROM it), which starts it as each F-Stack process; and it gets what the injected
// dataplane container gets (CPUs, hugepages, the DPDK volumes, the security context, the
// readiness and liveness endpoints). It is renamed fstack-dataplane: the operator's readiness
// count, `kubectl fstack status` and the admission checks on later updates (the image
// allow-list) all find a pod's dataplane by that name, so one that kept its own would escape
// them. The status annotation records the name it had.

// NativeFlag is the supervisor flag that names the program mode; the program's command and
// arguments follow "--".
const NativeFlag = "--native"

// ProgramStatus is what the status annotation records of a program container.
type ProgramStatus struct {
	// Container is the name the container had before it became the dataplane.
	Container string           `json:"container"`
	Mode      fsv1.ProgramMode `json:"mode"`
}

// planProgram picks the program container (p.program) and checks it can become the dataplane.
func (p *plan) planProgram() field.ErrorList {
	pr := p.spec.Program
	cs := p.pod.Spec.Containers
	p.program = -1
	switch {
	case pr.Container != "":
		p.program = slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == pr.Container })
		if p.program < 0 {
			return field.ErrorList{field.NotFound(stackLabelPath(), fmt.Sprintf(
				"StackInstance %q spec.program.container names container %q, which this pod does not have", p.stack, pr.Container))}
		}
	case len(cs) == 1:
		p.program = 0
	default:
		return field.ErrorList{field.Required(stackLabelPath(), fmt.Sprintf(
			"StackInstance %q runs a program linked with libfstack (spec.program) and this pod has %d containers: set spec.program.container to the one that runs it", p.stack, len(cs)))}
	}
	return p.checkProgramContainer(&cs[p.program], field.NewPath("spec", "containers").Index(p.program))
}

func (p *plan) checkProgramContainer(c *corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(c.Command) == 0 {
		errs = append(errs, field.Required(path.Child("command"), fmt.Sprintf(
			"container %q must set command (the program, e.g. [/usr/local/nginx_fstack/sbin/nginx, -c, /etc/nginx/nginx.conf]): the supervisor, the image's entrypoint, starts it as the F-Stack processes and cannot read the image's own command", c.Name)))
	}
	if !p.cfg.ImageAllowed(c.Image) {
		errs = append(errs, field.Invalid(path.Child("image"), shortImage(c.Image), fmt.Sprintf(
			"this container becomes the dataplane (spec.program) and gets its privileges, so its image must be one the operator runs as a dataplane: under %s (--allowed-dataplane-images) or %s, or an image built FROM kube-fstack's dataplane image and allowed there",
			strings.Join(p.cfg.AllowedImages, ", "), p.cfg.Image)))
	}
	for _, f := range probeFields {
		if *f.get(c) != nil {
			errs = append(errs, field.Forbidden(path.Child(f.name),
				"the program container's readiness and liveness are the supervisor's (/readyz: every F-Stack process up; /healthz), which the injection sets: the kubelet cannot reach a socket of F-Stack, and the probe agent reaches an app only through the fstack adapter, which a program linked with libfstack replaces; remove this probe"))
		}
	}
	if c.SecurityContext != nil {
		errs = append(errs, field.Forbidden(path.Child("securityContext"),
			"the program runs as the dataplane, whose security context is the injection's (root, every capability dropped but what the stack's devices need, the node's seccomp profile for DPDK): remove it"))
	}
	errs = append(errs, p.checkProgramResources(c, path.Child("resources"))...)
	errs = append(errs, checkProgramNames(c, path)...)
	return errs
}

// checkProgramResources: the CPUs and hugepages are the stack's, anything else is the user's.
func (p *plan) checkProgramResources(c *corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	cpus := p.dataplaneCPUs()
	want := resource.NewQuantity(int64(cpus), resource.DecimalSI)
	shared := p.sharedCPU()
	if p.spec.DPDK.CPUPolicy == fsv1.CPUShared {
		want = &shared
	}
	for _, kind := range []string{"limits", "requests"} {
		list := c.Resources.Limits
		if kind == "requests" {
			list = c.Resources.Requests
		}
		for _, name := range slices.Sorted(maps.Keys(list)) {
			q := list[name]
			switch {
			case name == corev1.ResourceCPU && q.Cmp(*want) != 0:
				errs = append(errs, field.Invalid(path.Child(kind).Key(string(name)), q.String(), fmt.Sprintf(
					"the program runs the F-Stack processes, spec.processes (%d), on %d exclusive CPUs (spec.dpdk.lcoresPerCPU %d per CPU; %s under cpuPolicy Shared): remove it or set it to %s", p.spec.Processes, cpus, max(p.spec.DPDK.LcoresPerCPU, 1), shared.String(), want.String())))
			case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
				errs = append(errs, field.Forbidden(path.Child(kind).Key(string(name)),
					"the hugepages are the StackInstance's (spec.dataplane.hugePages): remove it here"))
			}
		}
	}
	return errs
}

// checkProgramNames refuses what would collide with what the injection adds to the container.
func checkProgramNames(c *corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, e := range c.Env {
		if slices.Contains(programReservedEnv, e.Name) {
			errs = append(errs, field.Forbidden(path.Child("env").Index(j).Child("name"), fmt.Sprintf(
				"%s is set by the injection for the supervisor; remove it", e.Name)))
		}
	}
	for j, port := range c.Ports {
		if port.ContainerPort == podcontract.SupervisorPort || port.Name == podcontract.MetricsPortName {
			errs = append(errs, field.Forbidden(path.Child("ports").Index(j), fmt.Sprintf(
				"port %d (%s) is the supervisor's (/readyz, /healthz, /metrics); the program must listen elsewhere", podcontract.SupervisorPort, podcontract.MetricsPortName)))
		}
	}
	taken := append(sharedMounts(), corev1.VolumeMount{MountPath: podcontract.PodInfoDir},
		corev1.VolumeMount{MountPath: podcontract.AppStateDir}, corev1.VolumeMount{MountPath: podcontract.PodSocketDir})
	for j, m := range c.VolumeMounts {
		if slices.ContainsFunc(taken, func(s corev1.VolumeMount) bool { return s.MountPath == m.MountPath }) {
			errs = append(errs, field.Forbidden(path.Child("volumeMounts").Index(j).Child("mountPath"), fmt.Sprintf(
				"%s is where the injection mounts a volume of the dataplane; mount elsewhere", m.MountPath)))
		}
	}
	return errs
}

// programReservedEnv are the variables the dataplane container gets from the injection (and
// the app probes, which a program container never has).
var programReservedEnv = []string{podcontract.EnvPodUID, podcontract.EnvPodName, podcontract.EnvPodNamespace,
	podcontract.EnvNodeIPs, podcontract.EnvAppProbes, podcontract.EnvStatusToken}

// programContainer turns the program container into the dataplane: dp as the injection makes
// it, with the program's image, command (after the supervisor's flag), environment, ports,
// mounts and other resources. It is a regular container: the pod has no app container for a
// native sidecar to hold back, so dp's postStart hook (the shim's placement) is dropped.
func (p *plan) programContainer(c *corev1.Container, dp corev1.Container) corev1.Container {
	out := dp
	out.Image = c.Image
	if c.ImagePullPolicy != "" {
		out.ImagePullPolicy = c.ImagePullPolicy
	}
	out.RestartPolicy = nil
	out.Lifecycle = c.Lifecycle
	out.Command = nil // the image's entrypoint, fstack-supervisor with the image's own flags
	out.Args = append([]string{NativeFlag + "=" + string(p.spec.Program.Mode), "--"}, append(slices.Clone(c.Command), c.Args...)...)
	out.Env = append(slices.Clone(c.Env), dp.Env...)
	out.EnvFrom = c.EnvFrom
	out.Ports = append(slices.Clone(c.Ports), dp.Ports...)
	out.VolumeMounts = append(slices.Clone(c.VolumeMounts), dp.VolumeMounts...)
	out.VolumeDevices = c.VolumeDevices
	out.WorkingDir = c.WorkingDir
	out.Stdin, out.StdinOnce, out.TTY = c.Stdin, c.StdinOnce, c.TTY
	out.ResizePolicy = c.ResizePolicy
	// The dataplane's termination message policy stays (the supervisor's last log lines say why
	// it stopped); the API server defaults the pod's own before the webhook sees it.
	out.TerminationMessagePath = c.TerminationMessagePath
	limits := out.Resources.Limits
	for name, q := range c.Resources.Limits {
		if _, stack := limits[name]; !stack || name == corev1.ResourceMemory {
			limits[name] = q.DeepCopy() // the program's memory is its own call
		}
	}
	out.Resources = corev1.ResourceRequirements{Limits: limits, Requests: limits.DeepCopy(), Claims: c.Resources.Claims}
	p.applyCPUPolicy(&out.Resources)
	return out
}

func shortImage(image string) string {
	if len(image) > 256 {
		return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(image[:256], ""), len(image))
	}
	return image
}
