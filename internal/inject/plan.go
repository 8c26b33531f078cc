package inject

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// Prepared is what injection needs from one StackInstance, rendered once: the webhook keeps it
// per StackInstance generation, so a pod costs no rendering.
type Prepared struct {
	stack    string
	checked  *render.Spec
	spec     *fsv1.StackInstanceSpec // checked's, defaults applied
	cfg      Config
	hash     string
	specJSON string
	shimEnv  []corev1.EnvVar
	vhost    bool
	// networks are the Multus networks entries of the ports that name a network.
	networks []portNetwork
	// needs are the static and pool addresses a pod holds (addresses.go); served are the ones
	// the pod being injected holds.
	needs  []AddressNeed
	served []podcontract.ServedAddress
}

// plan is everything decided about one pod before it is changed, so a rejected pod is never
// half-mutated.
type plan struct {
	*Prepared
	pod  *corev1.Pod
	shim []int // indices into pod.Spec.Containers that get the shim
	// probes are the shim containers' probes the supervisor performs (probes.go).
	probes appProbePlan
	// networksValue is the pod's networks annotation with the stack's entries (networks.go).
	networksValue string
	// program is the index of the container that becomes the dataplane (spec.program), or -1.
	program int
	// token is the pod's status token (statustoken.go); "" when the config omits it.
	token string
}

// Prepare checks stack (render.Prepare, its one defaulting) and prepares it for injection; an
// invalid stack gives a *RejectError.
func Prepare(stack *fsv1.StackInstance, cfg Config) (*Prepared, error) {
	checked, errs := render.Prepare(&stack.Spec)
	if len(errs) > 0 {
		return nil, (&Prepared{stack: stack.Name}).reject(field.Invalid(stackLabelPath(), stack.Name, fmt.Sprintf(
			"StackInstance %q is not valid (%s); fix it, `kubectl describe stackinstance %s` shows every problem",
			stack.Name, errs.ToAggregate().Error(), stack.Name)))
	}
	return prepare(stack.Name, checked, cfg)
}

// prepare is Prepare of a checked spec: the injection's own checks (the operator's images, the
// snapshot's size) and what every pod of the stack gets.
func prepare(stack string, checked *render.Spec, cfg Config) (*Prepared, error) {
	p := &Prepared{stack: stack, checked: checked, spec: checked.Defaulted(), cfg: cfg}
	res := checked.Placeholder()
	if ferr := cfg.CheckImage(field.NewPath("spec", "dataplane", "image"), p.spec.Dataplane.Image); ferr != nil {
		// The StackInstance was admitted before the operator restricted its images.
		return nil, p.reject(field.Forbidden(stackLabelPath(), fmt.Sprintf("StackInstance %q: %s", stack, ferr.Error())))
	}
	p.hash = render.ConfigHash(res.Config)
	raw, err := snapshot.Encode(p.spec)
	if ferr := snapshotError(stackLabelPath(), raw, err); ferr != nil {
		if ferr.Type == field.ErrorTypeForbidden {
			// The StackInstance was admitted before the operator bounded its snapshot.
			ferr.Detail = fmt.Sprintf("StackInstance %q: %s", stack, ferr.Detail)
		}
		return nil, p.reject(ferr)
	}
	if errs := CheckBindings(field.NewPath("spec"), checked); len(errs) > 0 {
		// The StackInstance was admitted before the operator bounded its bindings.
		return nil, p.reject(field.Forbidden(stackLabelPath(), fmt.Sprintf("StackInstance %q: %s", stack, errs.ToAggregate())))
	}
	p.specJSON = string(raw)
	for _, e := range res.ShimEnv {
		p.shimEnv = append(p.shimEnv, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	p.vhost = render.HasVhostUser(p.spec)
	p.networks = portNetworks(p.spec, p.cfg.DefaultDataNetwork)
	if p.needs, err = addressNeeds(checked, p.cfg.DefaultDataNetwork); err != nil {
		return nil, p.reject(field.InternalError(stackLabelPath(), err))
	}
	return p, nil
}

// Bytes estimates the memory p holds, for the webhook's cache bound: the snapshot, the decoded
// spec (about as large, its strings are the same text) and the shim environment, with room for
// the Go structures around them.
func (p *Prepared) Bytes() int {
	return 3*len(p.specJSON) + 4096
}

// ConfigHash is the hash of the stack's placeholder-rendered config, as the pods record it.
func (p *Prepared) ConfigHash() string { return p.hash }

func newPlan(pod *corev1.Pod, prep *Prepared) (*plan, error) {
	p := &plan{Prepared: prep, pod: pod, program: -1}
	var errs field.ErrorList
	if prep.spec.Program != nil {
		errs = p.planProgram()
	} else {
		errs = append(errs, p.chooseShimContainers()...)
		errs = append(errs, p.planAppProbes()...)
	}
	errs = append(p.checkConflicts(), errs...)
	if prep.spec.DPDK.CPUPolicy != fsv1.CPUShared {
		// Under the lab's cpuPolicy Shared the pod is Burstable by design.
		errs = append(errs, checkGuaranteed(&pod.Spec, p.program)...)
	}
	var nerrs field.ErrorList
	p.networksValue, nerrs = p.mergeNetworks()
	errs = append(errs, nerrs...)
	if len(errs) > 0 {
		return nil, p.reject(errs...)
	}
	if !prep.cfg.OmitStatusToken {
		var err error
		if p.token, err = prep.cfg.newStatusToken(); err != nil {
			return nil, p.reject(field.InternalError(stackLabelPath(), err))
		}
	}
	return p, nil
}

func (p *Prepared) reject(errs ...*field.Error) error {
	return &RejectError{Stack: p.stack, Errs: errs}
}

func stackLabelPath() *field.Path {
	return field.NewPath("metadata", "labels").Key(fsv1.StackLabel)
}

// checkConflicts refuses pods that already use a name the injection adds or mount its volumes.
func (p *plan) checkConflicts() field.ErrorList {
	var errs field.ErrorList
	for i, c := range p.pod.Spec.InitContainers {
		if c.Name == podcontract.DataplaneContainer {
			errs = append(errs, field.Duplicate(field.NewPath("spec", "initContainers").Index(i).Child("name"), c.Name))
		}
	}
	for i, c := range p.pod.Spec.Containers {
		if c.Name == podcontract.DataplaneContainer && i != p.program {
			errs = append(errs, field.Duplicate(field.NewPath("spec", "containers").Index(i).Child("name"), c.Name))
		}
	}
	errs = append(errs, p.checkReserved()...)
	return append(errs, CheckHostPaths(p.pod, p.cfg)...)
}

// chooseShimContainers picks the app containers that get the shim and checks each can be
// started by the launcher.
func (p *plan) chooseShimContainers() field.ErrorList {
	if !*p.spec.Shim.Enabled {
		return nil
	}
	var errs field.ErrorList
	want := p.spec.Shim.Containers
	for _, name := range want {
		if !slices.ContainsFunc(p.pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name }) {
			errs = append(errs, field.NotFound(stackLabelPath(), fmt.Sprintf(
				"StackInstance %q spec.shim.containers names container %q, which this pod does not have", p.stack, name)))
		}
	}
	for i := range p.pod.Spec.Containers {
		c := &p.pod.Spec.Containers[i]
		if len(want) > 0 && !slices.Contains(want, c.Name) {
			continue
		}
		p.shim = append(p.shim, i)
		path := field.NewPath("spec", "containers").Index(i)
		if len(c.Command) == 0 {
			errs = append(errs, field.Required(path.Child("command"), fmt.Sprintf(
				"container %q must set command (the image's entrypoint, e.g. [nginx, -g, daemon off;]): the shim's launcher starts it after the dataplane is ready and cannot read the image's entrypoint", c.Name)))
		}
		for j, m := range c.VolumeMounts {
			if slices.ContainsFunc(appMounts(c.Name), func(s corev1.VolumeMount) bool { return s.MountPath == m.MountPath }) {
				errs = append(errs, field.Forbidden(path.Child("volumeMounts").Index(j).Child("mountPath"), fmt.Sprintf(
					"%s is where the injection mounts the volume the F-Stack processes share; mount elsewhere", m.MountPath)))
			}
		}
		for j, e := range c.Env {
			if by := p.setBy(e.Name); by != "" {
				errs = append(errs, field.Forbidden(path.Child("env").Index(j).Child("name"), fmt.Sprintf(
					"%s is set by %s; remove it, or leave this container out of the StackInstance's spec.shim.containers", e.Name, by)))
			}
		}
	}
	return errs
}

// setBy says who sets a variable an app container may not set itself: the injection, or the
// launcher (the shim's own variables, for the app's processes). LD_PRELOAD stays the app's: the
// launcher puts the shim ahead of it.
func (p *Prepared) setBy(name string) string {
	switch {
	case name == podcontract.EnvContainerName || slices.ContainsFunc(p.shimEnv, func(e corev1.EnvVar) bool { return e.Name == name }):
		return "the F-Stack shim injection"
	case name != podcontract.EnvPreload && slices.Contains(podcontract.ShimEnvNames(), name):
		return "the F-Stack shim's launcher for the app's processes"
	}
	return ""
}

// apply changes the pod; every check has passed.
func (p *plan) apply() {
	pod := p.pod
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[fsv1.StackLabel] = p.stack
	pod.Spec.ShareProcessNamespace = new(true)
	coverStop(&pod.Spec, p.drainSeconds())
	if p.cfg.NodeAffinity {
		addNodeAffinity(&pod.Spec, p.NodeRequirements())
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, p.volumes()...)
	dp := p.dataplaneContainer()
	var shimNames []string
	for _, i := range p.shim {
		p.addShim(&pod.Spec.Containers[i])
		shimNames = append(shimNames, pod.Spec.Containers[i].Name)
	}
	status := Status{
		Stack: p.stack, ConfigHash: p.hash, Dataplane: podcontract.DataplaneContainer,
		ShimContainers: shimNames, Volumes: p.volumeNames(),
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	p.applyAppProbes(&dp)
	if p.program >= 0 {
		c := &pod.Spec.Containers[p.program]
		status.Program = &ProgramStatus{Container: c.Name, Mode: p.spec.Program.Mode}
		*c = p.programContainer(c, dp)
	} else {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, dp)
	}
	p.addDrain(&pod.Spec)
	raw, _ := json.Marshal(status)
	pod.Annotations[podcontract.SpecAnnotation] = p.specJSON
	pod.Annotations[podcontract.SpecVersionAnnotation] = snapshot.Version()
	pod.Annotations[podcontract.ConfigHashAnnotation] = p.hash
	pod.Annotations[fsv1.StatusAnnotation] = string(raw)
	// Always the injection's: readers publish these addresses (EndpointSlices), so a value the
	// pod came with is never kept.
	if len(p.served) > 0 {
		pod.Annotations[podcontract.AddressesAnnotation] = podcontract.FormatAddresses(p.served)
	} else {
		delete(pod.Annotations, podcontract.AddressesAnnotation)
	}
	setNetworks(pod, p.networksValue)
	setBinding(pod, p.spec, p.cfg.DefaultDataNetwork)
}

// coverStop raises a grace period shorter than the pod needs to stop (the drain, then the
// launcher's escalation, then the dataplane's stop): a kubelet SIGKILL before that kills shim
// clients, and each leaks a shim context, and cuts the drain short. A longer one is the user's
// and stays; none means the API's default (30 s), kept when it covers it.
func coverStop(spec *corev1.PodSpec, drain int64) {
	need := drain + podcontract.TerminationGracePeriodSeconds()
	g := spec.TerminationGracePeriodSeconds
	if g == nil && need > corev1.DefaultTerminationGracePeriodSeconds || g != nil && *g < need {
		spec.TerminationGracePeriodSeconds = new(need)
	}
}

// hugePagesResource is the resource name of the spec's page size, e.g. hugepages-2Mi.
func (p *plan) hugePagesResource() corev1.ResourceName {
	return corev1.ResourceName(corev1.ResourceHugePagesPrefix + string(p.spec.Dataplane.HugePages.PageSize))
}

func (p *plan) hugePagesMedium() corev1.StorageMedium {
	return corev1.StorageMedium(string(corev1.StorageMediumHugePages) + "-" + string(p.spec.Dataplane.HugePages.PageSize))
}

// launcherPath is where the app containers find the launcher.
const launcherPath = podcontract.ShimDir + "/" + podcontract.Launcher
