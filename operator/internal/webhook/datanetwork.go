package webhook

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/netplan"
)

// The admission webhook holds every port to its DataNetwork.
// +kubebuilder:rbac:groups=kubefstack.io,resources=datanetworks,verbs=get;list;watch

// NetworkChecker holds a stack's ports to the DataNetworks they are on: a tenant's StackInstance
// may use only what the platform's network grants its namespace. The StackInstance webhook asks
// it on every create and update, and the pod injector again for every pod (the network may have
// changed since, or the stack may be older than the network).
type NetworkChecker struct {
	// Reader reads DataNetworks and Namespaces (the manager's cache).
	Reader client.Reader
	// Live reads from the API server on a cache miss (a network created a moment ago).
	Live client.Reader
	// Default is the network of a port that names none (--default-data-network).
	Default string
}

// Networks are the DataNetworks of a stack's ports, by name.
type Networks map[string]*fsv1.DataNetwork

// NodeSelector is every label the stack's networks require of a node.
func (n Networks) NodeSelector() map[string]string {
	out := map[string]string{}
	for _, dn := range n {
		for k, v := range dn.Spec.NodeSelector {
			out[k] = v
		}
	}
	return out
}

// portNetwork is one port's network as the checks need it.
type portNetwork struct {
	net     *netplan.Network
	granted netplan.Granted
}

// Check holds the defaulted spec of a stack in namespace to its ports' networks. A refusal is
// in errs, with the field and the fix; err is a failure to read.
func (c *NetworkChecker) Check(ctx context.Context, namespace string, spec *fsv1.StackInstanceSpec) (Networks, field.ErrorList, error) {
	nsLabels, err := c.namespaceLabels(ctx, namespace)
	if err != nil {
		return nil, nil, err
	}
	nets := Networks{}
	var errs field.ErrorList
	ports := field.NewPath("spec", "ports")
	byPort := map[string]*portNetwork{}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		pn, ferr, err := c.resolve(ctx, ports.Index(i).Child("dataNetwork"), p.DataNetwork, namespace, nsLabels, nets)
		if err != nil {
			return nil, nil, err
		}
		if ferr != nil {
			errs = append(errs, ferr)
			continue
		}
		byPort[p.Name] = pn
		errs = append(errs, checkAddressing(ports.Index(i), &p.Addressing, pn)...)
		errs = append(errs, checkMACs(ports.Index(i).Child("device"), &p.Device, pn)...)
	}
	for j := range spec.VLANs {
		v := &spec.VLANs[j]
		pn := byPort[v.Port]
		if pn == nil {
			continue
		}
		path := field.NewPath("spec", "vlans").Index(j)
		if msg := pn.net.VLANProblem(int(v.ID)); msg != "" {
			errs = append(errs, field.Forbidden(path.Child("id"), msg+": use a VLAN the network carries, or ask its owner to add it"))
		}
		errs = append(errs, checkAddressing(path, &v.Addressing, pn)...)
	}
	return nets, errs, nil
}

// resolve finds a port's network and what it grants namespace; a refusal is a field error.
func (c *NetworkChecker) resolve(ctx context.Context, path *field.Path, named, namespace string, nsLabels labels.Set, nets Networks) (*portNetwork, *field.Error, error) {
	name := cmp.Or(named, c.Default)
	if name == "" {
		return nil, field.Required(path, "name the DataNetwork the port is on (kubectl get datanetworks lists them); "+
			"the operator has no --default-data-network (the chart's dataNetwork.name)"), nil
	}
	dn := nets[name]
	if dn == nil {
		dn = &fsv1.DataNetwork{}
		err := c.get(ctx, types.NamespacedName{Name: name}, dn)
		switch {
		case apierrors.IsNotFound(err):
			return nil, field.NotFound(path, name), nil
		case err != nil:
			return nil, nil, fmt.Errorf("read DataNetwork %q: %w", name, err)
		}
		nets[name] = dn
	}
	n, err := netplan.Parse(dn.Plan())
	if err != nil {
		return nil, field.Invalid(path, name, fmt.Sprintf("DataNetwork %q is not valid (%v): its owner, the platform team, must fix it", name, err)), nil
	}
	selected := func(i int) bool {
		sel, err := metav1.LabelSelectorAsSelector(dn.Spec.Grants[i].NamespaceSelector)
		return err == nil && sel.Matches(nsLabels)
	}
	g := n.Grant(namespace, selected)
	if len(g) == 0 {
		return nil, field.Forbidden(path, fmt.Sprintf("DataNetwork %q grants namespace %q no addresses: ask the platform team for a grant (spec.grants of the DataNetwork)", name, namespace)), nil
	}
	return &portNetwork{net: n, granted: g}, nil, nil
}

func (c *NetworkChecker) namespaceLabels(ctx context.Context, namespace string) (labels.Set, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return nil, fmt.Errorf("read namespace %q: %w", namespace, err)
	}
	return ns.Labels, nil
}

func (c *NetworkChecker) get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	err := c.Reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && c.Live != nil {
		err = c.Live.Get(ctx, key, obj)
	}
	return err
}

// checkAddressing holds a port's or a VLAN's addresses, pools, gateways and VIPs to its network.
func checkAddressing(path *field.Path, a *fsv1.Addressing, pn *portNetwork) field.ErrorList {
	var errs field.ErrorList
	if a.IPv4 != nil {
		errs = append(errs, checkFamily(path.Child("ipv4"), a.IPv4.From, a.IPv4.Address, a.IPv4.Pool, a.IPv4.Gateway, pn)...)
	}
	if a.IPv6 != nil {
		errs = append(errs, checkFamily(path.Child("ipv6"), a.IPv6.From, a.IPv6.Address, a.IPv6.Pool, a.IPv6.Gateway, pn)...)
	}
	for _, vips := range []struct {
		name string
		list []string
	}{{"vips", a.VIPs}, {"vips6", a.VIPs6}} {
		for k, v := range vips.list {
			addr, err := netip.ParseAddr(v)
			if err != nil {
				continue // the renderer's error
			}
			if msg := pn.net.SourceProblem(addr, pn.granted); msg != "" {
				errs = append(errs, field.Forbidden(path.Child(vips.name).Index(k), msg+fix))
			}
		}
	}
	return errs
}

// fix ends every refusal of an address.
const fix = ": use an address the network grants the namespace (kubectl get datanetwork -o yaml shows its grants)"

func checkFamily(path *field.Path, from fsv1.AddressSource, address string, pool *fsv1.IPPool, gateway string, pn *portNetwork) field.ErrorList {
	var errs field.ErrorList
	switch {
	case from == fsv1.AddressPool && pool != nil:
		for k, entry := range pool.Ranges {
			r, err := netplan.ParseRange(entry)
			if err != nil {
				continue // the renderer's error
			}
			if msg := pn.net.RangeProblem(r, int(pool.PrefixLength), pn.granted); msg != "" {
				errs = append(errs, field.Forbidden(path.Child("pool", "ranges").Index(k), msg+fix))
			}
		}
	case from != fsv1.AddressAttachment && address != "":
		if p, err := netip.ParsePrefix(address); err == nil {
			if msg := pn.net.AddressProblem(p, pn.granted); msg != "" {
				errs = append(errs, field.Forbidden(path.Child("address"), msg+fix))
			}
		}
	}
	if gw, err := netip.ParseAddr(gateway); err == nil {
		if msg := pn.net.GatewayProblem(gw); msg != "" {
			errs = append(errs, field.Forbidden(path.Child("gateway"), msg))
		}
	}
	return errs
}

// checkMACs holds the MACs a stack sets to its network's policy.
func checkMACs(path *field.Path, d *fsv1.PortDevice, pn *portNetwork) field.ErrorList {
	var errs field.ErrorList
	if d.VhostUser != nil && d.VhostUser.MAC != "" {
		if msg := pn.net.MACProblem(d.VhostUser.MAC); msg != "" {
			errs = append(errs, field.Forbidden(path.Child("vhostUser", "mac"), msg))
		}
	}
	if d.Bond != nil && d.Bond.MAC != "" {
		if msg := pn.net.MACProblem(d.Bond.MAC); msg != "" {
			errs = append(errs, field.Forbidden(path.Child("bond", "mac"), msg))
		}
	}
	return errs
}
