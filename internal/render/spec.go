package render

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// Spec is a StackInstance spec the renderer has checked, with every default applied. Only
// Prepare makes one, so a function that takes a *Spec needs neither default nor check it again:
// each path prepares its spec once, from the API server's object (the webhook, the controller),
// the pod's snapshot (the dataplane's supervisor) or a file (the CLI), and renders, injects or
// derives node requirements from that. A Spec is never changed after Prepare: the webhook shares
// one among the pods it injects.
type Spec struct {
	spec *fsv1.StackInstanceSpec
	// boot and sysctl are the [freebsd.boot] and [freebsd.sysctl] sections: they depend on the
	// spec alone.
	boot, sysctl []kv
	profile      []ProfileValue
	// placeholder is the spec rendered with PlaceholderFacts, which Prepare does to run every
	// check that needs facts with stand-ins for them.
	placeholder *Result
	// pools are the spec's pools, parsed by Prepare's render, by field path.
	pools map[string]*Pool
}

// Prepare applies every default to a copy of raw and runs every check possible before a pod
// exists: the CRD's bounds and rules (the API server's, as the dataplane and the CLI must apply
// them to specs that never passed it), what F-Stack would crash on or silently ignore, and a
// render with PlaceholderFacts. It returns every problem found with its field path; the Spec only
// when there is none.
//
// The defaults are the CRD's (its markers are their only source; package crdwalk applies them as
// the API server does, so an offline render of a manifest matches what the API server stores),
// then the ones the schema cannot express: the tuning profile's (an explicit value must win over
// them, and they must win over F-Stack's) and the ones that depend on other fields (layerDefaults).
func Prepare(raw *fsv1.StackInstanceSpec) (*Spec, field.ErrorList) {
	// The CRD's bounds and rules first and alone: every later step sizes or indexes by them.
	d, errs := schemaDefaults(raw)
	if len(errs) > 0 {
		return nil, errs
	}
	s := &Spec{spec: layerDefaults(d), profile: ProfileValues(raw)}
	errs = checkSpec(s.spec)
	var bsdErrs field.ErrorList
	s.boot, s.sysctl, bsdErrs = freebsdSections(s.spec)
	// The checks that need facts, with stand-ins for them; the pools parsed here are the Spec's.
	pools := &poolSet{byPath: map[string]*Pool{}, parse: true}
	p, resolveErrs := resolve(s.spec, PlaceholderFacts(s), pools)
	if errs = append(append(errs, resolveErrs...), bsdErrs...); len(errs) > 0 {
		return nil, errs
	}
	if s.placeholder, errs = s.write(p); len(errs) > 0 {
		return nil, errs
	}
	s.pools = pools.byPath
	return s, nil
}

// Defaulted is the spec with every default applied. It is shared: read it, never change it.
func (s *Spec) Defaulted() *fsv1.StackInstanceSpec { return s.spec }

// Profile is what the spec's tuning profile sets, for display (config.ini already holds it); a
// copy of the Spec's.
func (s *Spec) Profile() []ProfileValue { return slices.Clone(s.profile) }

// Pool is the pool of spec.ports[port]'s IPv4 address (v4) or IPv6 address, parsed and checked,
// when that address is from: Pool; nil otherwise. Prepare parsed it: no later step parses a pool.
func (s *Spec) Pool(port int, v4 bool) *Pool { return s.pools[portPoolPath(port, v4).String()] }

// Placeholder is the spec rendered with PlaceholderFacts: config.ini and the EAL argv of a pod
// that does not exist yet (the operator's preview, the injector's config hash). Each call
// returns a copy of the Spec's.
func (s *Spec) Placeholder() *Result { return s.placeholder.clone() }

// Render renders spec against the facts of one pod. Only the checks that compare the spec with
// the facts are left; on any problem it returns a *ValidationError listing all of them.
func Render(spec *Spec, facts *Facts) (*Result, error) {
	p, errs := resolve(spec.spec, facts, &poolSet{byPath: spec.pools})
	if len(errs) > 0 {
		return nil, &ValidationError{Errs: errs}
	}
	res, errs := spec.write(p)
	if len(errs) > 0 {
		return nil, &ValidationError{Errs: errs}
	}
	return res, nil
}

// write writes what a resolved plan runs: config.ini, each process's EAL argv (which DPDK
// bounds), and what the launcher and the supervisor give the processes.
func (s *Spec) write(p *plan) (*Result, field.ErrorList) {
	cfg, errs := p.emit(s.boot, s.sysctl)
	eal := p.ealArgvs()
	if errs = append(errs, checkEAL(eal[0])...); len(errs) > 0 {
		return nil, errs
	}
	return &Result{
		Config: cfg, EAL: eal, LcoreMask: p.lcoreMask(), PortIDs: p.portIDsByName(),
		ShimEnv: p.shimEnv(), ShimEAL: p.shimEAL(), CPUs: p.cpus, FStackEnv: p.fstackEnv(),
		Profile: slices.Clone(s.profile),
	}, nil
}

// NodeRequirements are the node agent's labels a node must carry to run the stack: the static
// CPU manager, free hugepages of the stack's size and the dataplane's seccomp profile always, the
// vhost-user label for a vhost-user port (OVSDB, the netdev bridge, the socket root), the vfio
// label for a PCI function named by its address (a port's or a bond member's). The injector puts
// them in its pods' node affinity, so nodes without them are never picked, instead of a pod
// failing late on them; the operator's node metrics and `kubectl fstack doctor` read them to say
// which stacks need each of a node's checks. A function that comes from a device plugin's
// resource needs no label: the resource request already keeps the pod off nodes that do not
// advertise it, and the device plugin advertises only functions it has bound for DPDK.
func (s *Spec) NodeRequirements() []corev1.NodeSelectorRequirement {
	in := func(key, value string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}
	}
	reqs := []corev1.NodeSelectorRequirement{
		in(fsv1.NodeLabelCPUManager, fsv1.NodeCPUManagerStatic),
		in(fsv1.NodeLabelHugePages(s.spec.Dataplane.HugePages.PageSize), fsv1.NodeReady),
		in(fsv1.NodeLabelSeccomp, fsv1.NodeReady),
	}
	if HasVhostUser(s.spec) {
		reqs = append(reqs, in(fsv1.NodeLabelVhostUser, fsv1.NodeReady))
	}
	for i := range s.spec.Ports {
		if literalPCI(&s.spec.Ports[i]) {
			reqs = append(reqs, in(fsv1.NodeLabelVFIO, fsv1.NodeReady))
			break
		}
	}
	return reqs
}

// literalPCI reports whether a port uses a PCI function by address rather than by resource.
func literalPCI(port *fsv1.PortSpec) bool {
	if d := port.Device.PCI; d != nil && d.Address != "" {
		return true
	}
	if b := port.Device.Bond; b != nil {
		for _, m := range b.Members {
			if m.Address != "" {
				return true
			}
		}
	}
	return false
}
