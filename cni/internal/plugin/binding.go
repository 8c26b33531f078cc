package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/internal/netplan"
	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// What a port's anti-spoofing rules bind (antispoof.Spec) comes from the attachment: its MAC,
// the addresses its result reports (runtimeConfig.ips or IPAM's), and the stack's VIPs, VLAN
// addresses and VLAN ids, which the injector passes in the pod's networks entry (cni-args, which
// Multus hands over as args.cni) or, with no Multus, in a pod annotation the runtime hands over
// (runtimeConfig's pod-annotations capability). A pod can write both, so ADD holds what they say
// to the network: to the plan of the DataNetwork the binding names as the node config gives it
// (plan.go), to the network config's IPAM subnets, no address a gateway of it, and no MAC or
// address another port of the node holds.

// bindConf is what of the network config the binding reads, decoded apart from NetConf: the IPAM
// section's subnets and gateways, args.cni and the runtime's pod annotations.
type bindConf struct {
	IPAM struct {
		Subnet  string `json:"subnet"`
		Gateway string `json:"gateway"`
		Ranges  [][]struct {
			Subnet  string `json:"subnet"`
			Gateway string `json:"gateway"`
		} `json:"ranges"`
	} `json:"ipam"`
	Args struct {
		CNI map[string]json.RawMessage `json:"cni"`
	} `json:"args"`
	RuntimeConfig struct {
		PodAnnotations map[string]string `json:"io.kubernetes.cri.pod-annotations"`
	} `json:"runtimeConfig"`
}

// claim is one address the port binds and the config field it came from, for messages; an
// address of the port's own has its prefix length too (prefix), which the network's plan holds
// to its subnet's.
type claim struct {
	addr   netip.Addr
	field  string
	prefix netip.Prefix
}

// vlanClaim is one VLAN the port sends tagged frames on and the field it came from.
type vlanClaim struct {
	id    int
	field string
}

// bindingInputs is everything ADD decides the port's binding from, gathered before anything is
// decided: what the network holds the port to and what the port claims.
type bindingInputs struct {
	network  string
	mac      string
	subnets  []netip.Prefix // the IPAM section's: the port's own addresses must be in one
	gateways []netip.Addr   // the IPAM section's and the IPAM result's: no pod may claim them
	own      []claim        // the result's addresses and the annotation's ips
	extra    []claim        // VIPs and VLAN addresses (sources): not held to the subnets
	vlans    []vlanClaim
	// The DataNetwork the carriers name (network), and where they name it.
	netName, netField string
	// askedMAC is the MAC the pod asked for (runtimeConfig.mac, the network config's mac) and
	// macField where; empty when the port has the MAC fstack-cni derives.
	askedMAC, macField string
	// plan is the port's DataNetwork as the node config gives it, granted what it grants the
	// pod's namespace; nil when the node config lists no network (planPolicies hold nothing).
	plan      *netplan.Network
	granted   netplan.Granted
	namespace string
}

// binding decides the port's antispoof.Spec for ADD and checks it against the network config;
// the port's transaction checks the claims against the node's other ports (noOtherClaims).
func (c *command) binding(a *attachment, stdin []byte, ipam *current.Result) (antispoof.Spec, []claim, error) {
	in, err := c.gatherBinding(a, stdin, ipam)
	if err != nil {
		return antispoof.Spec{}, nil, err
	}
	if err := c.networkPlan(a, in); err != nil {
		return antispoof.Spec{}, nil, err
	}
	spec, claims, err := decideBinding(in)
	if err != nil {
		return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", err)
	}
	return spec, claims, nil
}

// gatherBinding reads what the binding is decided from: the network config's IPAM section, the
// IPAM result (or runtimeConfig.ips) and the two carriers of the stack's binding, each read by
// podcontract's codec, which refuses anything but a binding.
func (c *command) gatherBinding(a *attachment, stdin []byte, ipam *current.Result) (*bindingInputs, error) {
	var bc bindConf
	if err := json.Unmarshal(stdin, &bc); err != nil {
		return nil, cniErr(types.ErrDecodingFailure, "network config", err)
	}
	in := &bindingInputs{network: c.conf.Name, mac: a.MAC}
	var err error
	if in.subnets, in.gateways, err = bc.subnetsAndGateways(); err != nil {
		return nil, cniErr(types.ErrInvalidNetworkConfig, "", err)
	}
	in.addResult(ipam, c.resultField())
	if err := in.addCarriers(&bc, a.IfName); err != nil {
		return nil, cniErr(types.ErrInvalidNetworkConfig, "", err)
	}
	if m := firstNonEmpty(c.conf.RuntimeConfig.MAC, c.conf.MAC); m != "" && !strings.EqualFold(m, stableMAC(a.Pod.UID, a.IfName)) {
		in.askedMAC, in.macField = m, c.macField()
	}
	return in, nil
}

// resultField names where the result's addresses came from, for messages.
func (c *command) resultField() string {
	if len(c.conf.RuntimeConfig.IPs) > 0 {
		return "runtimeConfig.ips"
	}
	return "IPAM result"
}

// addResult takes the result's addresses as the port's own, and its gateways as the network's.
func (in *bindingInputs) addResult(ipam *current.Result, field string) {
	if ipam == nil {
		return
	}
	for _, ip := range ipam.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			ones, bits := ip.Address.Mask.Size()
			if a = a.Unmap(); a.Is4() && bits == 128 {
				ones -= 96
			}
			in.own = append(in.own, claim{a, field, netip.PrefixFrom(a, ones)})
		}
		if g, ok := netip.AddrFromSlice(ip.Gateway); ok && ip.Gateway != nil {
			in.gateways = append(in.gateways, g.Unmap())
		}
	}
}

// addCarriers takes the binding of the networks entry (args.cni, Multus) and the interface's of
// the pod annotation (chained), when the runtime hands them over.
func (in *bindingInputs) addCarriers(bc *bindConf, ifname string) error {
	if raw, ok := bc.Args.CNI[podcontract.CNIArgsBinding]; ok {
		field := "args.cni." + podcontract.CNIArgsBinding
		pb, err := podcontract.DecodeBinding(field, raw)
		if err != nil {
			return err
		}
		if err := in.add(&pb, field); err != nil {
			return err
		}
	}
	if raw, ok := bc.RuntimeConfig.PodAnnotations[podcontract.BindingAnnotation]; ok {
		field := "annotation " + podcontract.BindingAnnotation
		all, err := podcontract.DecodeBindings(field, raw)
		if err != nil {
			return err
		}
		if pb, ok := all[ifname]; ok {
			return in.add(&pb, field+"["+ifname+"]")
		}
	}
	return nil
}

// add takes a decoded binding, whose values the codec has checked (an address that did not
// parse would be the invalid one, which sendable refuses). Both carriers may name the port's
// network, never two different ones.
func (in *bindingInputs) add(pb *podcontract.PortBinding, field string) error {
	for _, s := range pb.IPs {
		p, _ := netip.ParsePrefix(s)
		in.own = append(in.own, claim{p.Addr().Unmap(), field + ".ips", netip.PrefixFrom(p.Addr().Unmap(), p.Bits())})
	}
	for _, s := range pb.Sources {
		a, _ := netip.ParseAddr(s)
		in.extra = append(in.extra, claim{addr: a.Unmap(), field: field + ".sources"})
	}
	for _, v := range pb.VLANs {
		in.vlans = append(in.vlans, vlanClaim{v, field + ".vlans"})
	}
	if pb.Network == "" {
		return nil
	}
	if in.netName != "" && in.netName != pb.Network {
		return fmt.Errorf("%s.network is %q but %s is %q: a port is on one DataNetwork; the injector writes both, remove them", field, pb.Network, in.netField, in.netName)
	}
	in.netName, in.netField = pb.Network, field+".network"
	return nil
}

// decideBinding is the port's binding, or the first refusal of the policies: the network's
// plan (planPolicies), the port's own addresses in the network config's subnets, then every
// claim sendable and no gateway, then the whole within what a port's rules hold. It is pure:
// the inputs are all it reads.
func decideBinding(in *bindingInputs) (antispoof.Spec, []claim, error) {
	for _, policy := range planPolicies {
		if in.plan == nil {
			break
		}
		if err := policy(in); err != nil {
			return antispoof.Spec{}, nil, err
		}
	}
	if err := ownInSubnets(in.own, in.subnets); err != nil {
		return antispoof.Spec{}, nil, err
	}
	claims := slices.Concat(in.own, in.extra)
	for _, cl := range claims {
		for _, policy := range claimPolicies {
			if err := policy(in, cl); err != nil {
				return antispoof.Spec{}, nil, err
			}
		}
	}
	spec := antispoof.Spec{MAC: strings.ToLower(in.mac), Addrs: distinctAddrs(claims), VLANs: distinctVLANs(in.vlans)}
	if err := withinBounds(spec); err != nil {
		return antispoof.Spec{}, nil, err
	}
	return spec, claims, nil
}

// claimPolicies each refuse a claim no port may make, in order.
var claimPolicies = []func(*bindingInputs, claim) error{sendable, notAGateway}

// sendable refuses an address no port sends from: multicast, loopback, unspecified, zoned.
func sendable(_ *bindingInputs, cl claim) error {
	a := cl.addr
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a.Zone() != "" {
		return fmt.Errorf("%s: %s is not a unicast address a port can send from", cl.field, a)
	}
	return nil
}

// notAGateway refuses a gateway of the network: a pod claiming it would take the network's
// traffic.
func notAGateway(in *bindingInputs, cl claim) error {
	if slices.Contains(in.gateways, cl.addr) {
		return fmt.Errorf("%s: %s is a gateway of network %s (its ipam section or IPAM result), which no pod may claim: give the stack another address", cl.field, cl.addr, in.network)
	}
	return nil
}

// withinBounds refuses more addresses or VLANs than a port's rules hold.
func withinBounds(spec antispoof.Spec) error {
	if len(spec.Addrs) > antispoof.MaxAddrs || len(spec.VLANs) > antispoof.MaxVLANs {
		return fmt.Errorf("the port binds %d addresses and %d VLANs, at most %d and %d: give the stack fewer VIPs or VLANs", len(spec.Addrs), len(spec.VLANs), antispoof.MaxAddrs, antispoof.MaxVLANs)
	}
	return nil
}

func distinctAddrs(claims []claim) []netip.Addr {
	var addrs []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, cl := range claims {
		if !seen[cl.addr] {
			seen[cl.addr] = true
			addrs = append(addrs, cl.addr)
		}
	}
	return addrs
}

func distinctVLANs(vlans []vlanClaim) []uint16 {
	ids := make([]int, len(vlans))
	for i, v := range vlans {
		ids[i] = v.id
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(ids)))
	out := make([]uint16, 0, len(sorted))
	for _, v := range sorted {
		out = append(out, uint16(v))
	}
	return out
}

// subnetsAndGateways reads the IPAM section's subnet (host-local's single-range form) and
// ranges, and their gateways. A malformed one is an error: with static addresses IPAM does not
// run to refuse it, and the subnet check would then hold nothing.
func (bc *bindConf) subnetsAndGateways() ([]netip.Prefix, []netip.Addr, error) {
	var subnets []netip.Prefix
	var gateways []netip.Addr
	add := func(field, subnet, gateway string) error {
		if subnet != "" {
			p, err := netip.ParsePrefix(subnet)
			if err != nil {
				return fmt.Errorf("%s.subnet %q is not a CIDR (10.56.0.0/24)", field, subnet)
			}
			subnets = append(subnets, p.Masked())
		}
		if gateway != "" {
			g, err := netip.ParseAddr(gateway)
			if err != nil {
				return fmt.Errorf("%s.gateway %q is not an address", field, gateway)
			}
			gateways = append(gateways, g.Unmap())
		}
		return nil
	}
	if err := add("ipam", bc.IPAM.Subnet, bc.IPAM.Gateway); err != nil {
		return nil, nil, err
	}
	for i, set := range bc.IPAM.Ranges {
		for j, r := range set {
			if err := add(fmt.Sprintf("ipam.ranges[%d][%d]", i, j), r.Subnet, r.Gateway); err != nil {
				return nil, nil, err
			}
		}
	}
	return subnets, gateways, nil
}

// ownInSubnets holds the port's own addresses to the network's subnets. A network whose IPAM
// section declares none (no ipam, or a plugin of another shape) holds them to nothing.
func ownInSubnets(own []claim, subnets []netip.Prefix) error {
	if len(subnets) == 0 {
		return nil
	}
	for _, cl := range own {
		if !slices.ContainsFunc(subnets, func(p netip.Prefix) bool { return p.Contains(cl.addr) }) {
			return fmt.Errorf("%s: %s is outside network's subnets %v (its ipam section's subnet and ranges): give the stack an address in them, or the network the subnet", cl.field, cl.addr, subnets)
		}
	}
	return nil
}

// A port's claims (its MAC and every address its rules bind) are recorded in its external_ids,
// the addresses each under a key of its own (idHolds+address), so the transaction that makes the
// port can refuse, atomically, a MAC or address another pod's port holds: one wait per claim
// after the inserts and the version's select (claimWaitIndex on). Two ADDs can therefore never both take an address; and
// the usual ADD pays nothing for the check. The ports of the same pod (an earlier sandbox of it,
// or an earlier ADD of this attachment, which ADD replaces) do not count.
const (
	idHolds        = podcontract.OVSIDHoldsPrefix
	idHeld         = "true"
	claimWaitIndex = 8
)

func noOtherClaims(p *portSpec) []ovsdb.Op {
	notThisPod := ovsdb.Cond("external_ids", "excludes", ovsdb.Map(map[string]string{podcontract.OVSIDPodUID: p.IDs[podcontract.OVSIDPodUID]}))
	held := func(k, v string) ovsdb.Op {
		return ovsdb.WaitEqual("Interface", [][]any{ovsdb.Cond("external_ids", "includes", ovsdb.Map(map[string]string{k: v})), notThisPod},
			[]string{"name"}, []map[string]any{})
	}
	ops := []ovsdb.Op{held(podcontract.OVSIDMAC, p.IDs[podcontract.OVSIDMAC])}
	keys := make([]string, 0, len(p.IDs))
	for k := range p.IDs {
		if strings.HasPrefix(k, idHolds) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		ops = append(ops, held(k, idHeld))
	}
	return ops
}

func isClaimWait(err error) bool {
	var tx *ovsdb.TxError
	return ovsdb.IsConditionFailed(err) && errors.As(err, &tx) && tx.Index >= claimWaitIndex
}

// claimHolder says which port holds what a's port claims, after the server refused the port for
// it: an error naming the field, the holder and the fix.
func (c *command) claimHolder(a *attachment) error {
	spec := a.portSpec(c.conf.MTU)
	ids := ovsdb.Map(map[string]string{podcontract.OVSIDOwner: pluginType})
	res, err := c.ovs.transact(c.ctx, ovsdb.Select("Interface", [][]any{ovsdb.Cond("external_ids", "includes", ids)}, "name", "external_ids"))
	if err != nil {
		return ovsErr(err)
	}
	for _, row := range res[0].Rows {
		name, err := row.String("name")
		if err != nil {
			return ovsErr(err)
		}
		other, err := row.Map("external_ids")
		if err != nil {
			return ovsErr(err)
		}
		if other[podcontract.OVSIDPodUID] == a.Pod.UID {
			continue
		}
		holder := fmt.Sprintf("port %s of pod %s/%s (network %s, interface %s)", name, other[podcontract.OVSIDPodNamespace], other[podcontract.OVSIDPodName], other[podcontract.OVSIDNetwork], other[podcontract.OVSIDIfName])
		if strings.EqualFold(other[podcontract.OVSIDMAC], spec.IDs[podcontract.OVSIDMAC]) {
			return cniErr(types.ErrInvalidNetworkConfig, "", fmt.Errorf("%s: MAC %s is held by %s on this node: give this port another MAC "+
				"(the StackInstance's spec.ports[].device.vhostUser.mac, or none for one derived from the pod), or delete that pod", c.macField(), a.MAC, holder))
		}
		for _, cl := range a.claims {
			if other[idHolds+cl.addr.String()] == idHeld {
				return cniErr(types.ErrInvalidNetworkConfig, "", fmt.Errorf("%s: address %s is held by %s on this node: give this stack another address (or VIP), or delete that pod", cl.field, cl.addr, holder))
			}
		}
	}
	// The holder went away meanwhile: the runtime's retry will find the address free.
	return cniErr(types.ErrTryAgainLater, "", errors.New("a MAC or address of this port was held by another pod's port, which is gone now: try again"))
}

// macField names where the attachment's MAC came from, for messages.
func (c *command) macField() string {
	switch {
	case c.conf.RuntimeConfig.MAC != "":
		return "runtimeConfig.mac"
	case c.conf.MAC != "":
		return "mac"
	}
	return "the MAC derived from the pod"
}
