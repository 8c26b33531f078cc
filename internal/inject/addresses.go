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
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// AddressNeed is one address each pod of the stack serves and admission must hold for it: a
// port's static address (one pod at a time may serve it) or an address from a port's pool (each
// pod its own). Addresses from the attachment's IPAM are the network's to keep apart.
type AddressNeed struct {
	// Port is the index of the port in spec.ports, PortName its name.
	Port     int
	PortName string
	// Network is the DataNetwork the port is on: its spec.ports[].dataNetwork, or the
	// injector's DefaultDataNetwork; empty when neither names one.
	Network string
	// Field is the spec field the address comes from, e.g. spec.ports[0].ipv4, for messages.
	Field string
	// Static is the static address with its prefix length, when the port has one.
	Static netip.Prefix
	// Pool is the port's pool, when it has one; the pod's address is one of Pool's.
	Pool *render.Pool
}

// AddressNeeds lists the addresses a pod of the stack must hold, in spec order (each port's IPv4,
// then its IPv6).
func (p *Prepared) AddressNeeds() []AddressNeed { return p.needs }

// addressNeeds reads them from the checked spec, whose pools Prepare parsed.
func addressNeeds(checked *render.Spec, defaultNetwork string) ([]AddressNeed, error) {
	var out []AddressNeed
	for i := range checked.Defaulted().Ports {
		for _, v4 := range []bool{true, false} {
			var err error
			if out, err = appendNeed(out, checked, i, v4, defaultNetwork); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// appendNeed appends the need of spec.ports[port]'s IPv4 (v4) or IPv6 address, if it has one.
func appendNeed(out []AddressNeed, checked *render.Spec, port int, v4 bool, defaultNetwork string) ([]AddressNeed, error) {
	ps := &checked.Defaulted().Ports[port]
	family, from, addr := "ipv6", fsv1.AddressSource(""), ""
	if v4 {
		family = "ipv4"
	}
	if v4 && ps.IPv4 != nil {
		from, addr = ps.IPv4.From, ps.IPv4.Address
	} else if !v4 && ps.IPv6 != nil {
		from, addr = ps.IPv6.From, ps.IPv6.Address
	}
	n := AddressNeed{Port: port, PortName: ps.Name, Network: cmp.Or(ps.DataNetwork, defaultNetwork),
		Field: field.NewPath("spec", "ports").Index(port).Child(family).String()}
	switch from {
	case fsv1.AddressStatic:
		pfx, err := netip.ParsePrefix(addr)
		if err != nil {
			return nil, fmt.Errorf("%s.address: %w", n.Field, err)
		}
		n.Static = pfx
	case fsv1.AddressPool:
		if n.Pool = checked.Pool(port, v4); n.Pool == nil {
			return nil, fmt.Errorf("%s.pool: not parsed by render.Prepare", n.Field)
		}
	default:
		return out, nil
	}
	return append(out, n), nil
}

// InjectAddresses is Inject for a pod that holds addrs, one per AddressNeeds entry in its order
// (the static address itself for a static need, one of the pool's for a pool need): the pod's
// spec snapshot gives each pool port its address as a static one, so the dataplane serves it,
// the Multus networks entry asks the network for it (runtimeConfig ips), and the
// podcontract.AddressesAnnotation lists every address the pod serves. The caller (the admission
// webhook) has claimed them.
func (p *Prepared) InjectAddresses(pod *corev1.Pod, addrs []netip.Addr) (*corev1.Pod, Decision, error) {
	if d := Decide(pod); d != Injected {
		return skipped(pod, d, p.cfg)
	}
	if len(addrs) != len(p.needs) {
		return nil, "", p.reject(field.InternalError(stackLabelPath(), fmt.Errorf(
			"%d addresses for the %d the stack needs", len(addrs), len(p.needs))))
	}
	pp, err := p.withAddresses(addrs)
	if err != nil {
		return nil, "", err
	}
	return pp.inject(pod)
}

// withAddresses is p for one pod holding addrs: its pool ports rewritten as static addresses in
// the spec the pod carries, the networks entries and the served addresses to match.
func (p *Prepared) withAddresses(addrs []netip.Addr) (*Prepared, error) {
	pp := *p
	served := make([]podcontract.ServedAddress, 0, len(addrs))
	var spec *fsv1.StackInstanceSpec
	for i, n := range p.needs {
		a := addrs[i]
		if n.Pool == nil {
			if a != n.Static.Addr() {
				return nil, p.reject(field.InternalError(stackLabelPath(), fmt.Errorf("%s: %s is not the static address %s", n.Field, a, n.Static)))
			}
			served = append(served, podcontract.ServedAddress{Port: n.Port, PortName: n.PortName, Addr: a})
			continue
		}
		if !n.Pool.Contains(a) {
			return nil, p.reject(field.InternalError(stackLabelPath(), fmt.Errorf("%s: %s is not in the pool", n.Field, a)))
		}
		if spec == nil {
			spec = p.spec.DeepCopy()
		}
		snapshot.PinAddress(spec, n.Port, netip.PrefixFrom(a, n.Pool.Bits))
		served = append(served, podcontract.ServedAddress{Port: n.Port, PortName: n.PortName, Addr: a})
	}
	if spec != nil {
		raw, err := snapshot.Encode(spec)
		if ferr := snapshotError(stackLabelPath(), raw, err); ferr != nil {
			return nil, p.reject(ferr)
		}
		pp.spec, pp.specJSON, pp.networks = spec, string(raw), portNetworks(spec, p.cfg.DefaultDataNetwork)
	}
	pp.served = served
	return &pp, nil
}

// FirstAddresses are the addresses of the stack's first pod: the static ones and each pool's
// first. Admission injects a pod with them to check it before it claims any (the checks do not
// depend on the addresses).
func (p *Prepared) FirstAddresses() []netip.Addr {
	out := make([]netip.Addr, 0, len(p.needs))
	for _, n := range p.needs {
		a := n.Static.Addr()
		if n.Pool != nil {
			a = n.Pool.First()
		}
		out = append(out, a)
	}
	return out
}

// staticAddresses are the addresses of a stack without pools: its static ones.
func (p *Prepared) staticAddresses() ([]netip.Addr, error) {
	out := make([]netip.Addr, 0, len(p.needs))
	for _, n := range p.needs {
		if n.Pool != nil {
			return nil, p.reject(field.Forbidden(stackLabelPath(), fmt.Sprintf(
				"StackInstance %q gives each pod its own address from the pool at %s, which only the operator's admission webhook assigns: "+
					"create the pod through the API server of a cluster running kube-fstack", p.stack, n.Field)))
		}
		out = append(out, n.Static.Addr())
	}
	return out, nil
}
