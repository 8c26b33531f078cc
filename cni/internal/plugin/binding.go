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
	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// What a port's anti-spoofing rules bind (antispoof.Spec) comes from the attachment: its MAC,
// the addresses its result reports (runtimeConfig.ips or IPAM's), and the stack's VIPs, VLAN
// addresses and VLAN ids, which the injector passes in the pod's networks entry (cni-args, which
// Multus hands over as args.cni) or, with no Multus, in a pod annotation the runtime hands over
// (runtimeConfig's pod-annotations capability). A pod can write both, so ADD holds what they say
// to the network: its own addresses in the IPAM section's subnets, none a gateway of it, and no
// MAC or address another port of the node holds.

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

// claim is one address the port binds and the config field it came from, for messages.
type claim struct {
	addr  netip.Addr
	field string
}

// binding decides the port's antispoof.Spec for ADD and checks it against the network config;
// the port's transaction checks the claims against the node's other ports (noOtherClaims).
func (c *command) binding(a *attachment, stdin []byte, ipam *current.Result) (antispoof.Spec, []claim, error) {
	var bc bindConf
	if err := json.Unmarshal(stdin, &bc); err != nil {
		return antispoof.Spec{}, nil, cniErr(types.ErrDecodingFailure, "network config", err)
	}
	subnets, gateways, err := bc.subnetsAndGateways()
	if err != nil {
		return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", err)
	}
	var own []claim   // the port's own addresses: held to the subnets
	var extra []claim // VIPs and VLAN addresses
	var vlans []int
	staticField := "IPAM result"
	if len(c.conf.RuntimeConfig.IPs) > 0 {
		staticField = "runtimeConfig.ips"
	}
	if ipam != nil {
		for _, ip := range ipam.IPs {
			if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
				own = append(own, claim{a.Unmap(), staticField})
			}
			if g, ok := netip.AddrFromSlice(ip.Gateway); ok && ip.Gateway != nil {
				gateways = append(gateways, g.Unmap())
			}
		}
	}
	from := func(pb *podcontract.PortBinding, field string) error {
		for _, s := range pb.IPs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return fmt.Errorf("%s.ips: %q is not an address with a prefix length (10.99.0.10/24)", field, s)
			}
			own = append(own, claim{p.Addr().Unmap(), field + ".ips"})
		}
		for _, s := range pb.Sources {
			addr, err := netip.ParseAddr(s)
			if err != nil {
				return fmt.Errorf("%s.sources: %q is not an address", field, s)
			}
			extra = append(extra, claim{addr.Unmap(), field + ".sources"})
		}
		for _, v := range pb.VLANs {
			if v < 1 || v > 4094 {
				return fmt.Errorf("%s.vlans: %d is not a VLAN id (1..4094)", field, v)
			}
			vlans = append(vlans, v)
		}
		return nil
	}
	if raw, ok := bc.Args.CNI[podcontract.CNIArgsBinding]; ok {
		var pb podcontract.PortBinding
		if err := json.Unmarshal(raw, &pb); err != nil {
			return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", fmt.Errorf("args.cni.%s is not a binding ({\"sources\": [...], \"vlans\": [...]}): %w", podcontract.CNIArgsBinding, err))
		}
		if err := from(&pb, "args.cni."+podcontract.CNIArgsBinding); err != nil {
			return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", err)
		}
	}
	if raw, ok := bc.RuntimeConfig.PodAnnotations[podcontract.BindingAnnotation]; ok {
		var all map[string]podcontract.PortBinding
		if err := json.Unmarshal([]byte(raw), &all); err != nil {
			return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", fmt.Errorf("the pod's annotation %s is not a binding per interface ({\"%s\": {\"ips\": [...], \"sources\": [...], \"vlans\": [...]}}): %w: remove it, the injector writes it", podcontract.BindingAnnotation, a.IfName, err))
		}
		if pb, ok := all[a.IfName]; ok {
			if err := from(&pb, "annotation "+podcontract.BindingAnnotation+"["+a.IfName+"]"); err != nil {
				return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", err)
			}
		}
	}
	if err := checkOwn(own, subnets); err != nil {
		return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", err)
	}
	claims := slices.Concat(own, extra)
	spec := antispoof.Spec{MAC: strings.ToLower(a.MAC)}
	seen := map[netip.Addr]bool{}
	for _, cl := range claims {
		if !cl.addr.IsValid() || cl.addr.IsUnspecified() || cl.addr.IsMulticast() || cl.addr.IsLoopback() || cl.addr.Zone() != "" {
			return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", fmt.Errorf("%s: %s is not a unicast address a port can send from", cl.field, cl.addr))
		}
		if slices.Contains(gateways, cl.addr) {
			return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", fmt.Errorf("%s: %s is a gateway of network %s (its ipam section or IPAM result), which no pod may claim: give the stack another address", cl.field, cl.addr, c.conf.Name))
		}
		if !seen[cl.addr] {
			seen[cl.addr] = true
			spec.Addrs = append(spec.Addrs, cl.addr)
		}
	}
	slices.Sort(vlans)
	for _, v := range slices.Compact(vlans) {
		spec.VLANs = append(spec.VLANs, uint16(v))
	}
	if len(spec.Addrs) > antispoof.MaxAddrs || len(spec.VLANs) > antispoof.MaxVLANs {
		return antispoof.Spec{}, nil, cniErr(types.ErrInvalidNetworkConfig, "", fmt.Errorf("the port binds %d addresses and %d VLANs, at most %d and %d: give the stack fewer VIPs or VLANs", len(spec.Addrs), len(spec.VLANs), antispoof.MaxAddrs, antispoof.MaxVLANs))
	}
	return spec, claims, nil
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

// checkOwn holds the port's own addresses to the network's subnets. A network whose IPAM
// section declares none (no ipam, or a plugin of another shape) holds them to nothing.
func checkOwn(own []claim, subnets []netip.Prefix) error {
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
	idHolds        = "kube-fstack.io/holds/"
	idHeld         = "true"
	claimWaitIndex = 6
)

func noOtherClaims(p *portSpec) []ovsdb.Op {
	notThisPod := ovsdb.Cond("external_ids", "excludes", ovsdb.Map(map[string]string{idPodUID: p.IDs[idPodUID]}))
	held := func(k, v string) ovsdb.Op {
		return ovsdb.WaitEqual("Interface", [][]any{ovsdb.Cond("external_ids", "includes", ovsdb.Map(map[string]string{k: v})), notThisPod},
			[]string{"name"}, []map[string]any{})
	}
	ops := []ovsdb.Op{held(idMAC, p.IDs[idMAC])}
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
	ids := ovsdb.Map(map[string]string{idOwner: pluginType})
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
		if other[idPodUID] == a.Pod.UID {
			continue
		}
		holder := fmt.Sprintf("port %s of pod %s/%s (network %s, interface %s)", name, other[idPodNamespace], other[idPodName], other[idNetwork], other[idIfName])
		if strings.EqualFold(other[idMAC], spec.IDs[idMAC]) {
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
