package plugin

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// A port is on one of the platform's data networks (a DataNetwork), which its binding names
// (network) or else the node's default. What the network allows comes from the node config
// (nodeconf: networks, defaultNetwork), which the platform writes, never from the pod or its
// network config, which a tenant writes: the port's own addresses, the addresses it sends from,
// its VLANs and the MAC it asks for must be what the network grants the pod's namespace
// (internal/netplan, the checks the admission webhook runs on the StackInstance and the pod).
// fstack-cni reads no namespace labels, so a grant by namespaceSelector counts for any
// namespace here; the webhook held the pod to it. A node config that lists no network
// enforces no plan (clusters installed before DataNetworks): ADD warns and holds the port to
// its network config alone, as before.

// networkPlan finds the port's network in the node config and what it grants the pod's
// namespace, or refuses a network the node does not carry.
func (c *command) networkPlan(a *attachment, in *bindingInputs) error {
	if !c.node.EnforcesNetworks() {
		c.log.Warn("this node enforces no network plan: the port's addresses, VLANs and MAC are held to its network config " +
			"alone, which its namespace may write; give the node the platform's networks (chart value dataNetwork, which the " +
			"CNI DaemonSet's installer writes into the node config's networks)")
		return nil
	}
	name, from := in.netName, in.netField
	if name == "" {
		name, from = c.node.DefaultNetwork, "the node config's defaultNetwork"
	}
	if name == "" {
		return cniErr(types.ErrInvalidNetworkConfig, "", fmt.Errorf("the port's binding names no DataNetwork and the node config has no "+
			"defaultNetwork: set spec.ports[].dataNetwork in the StackInstance to one of this node's networks (%s), or give the "+
			"operator and the node a default (chart value dataNetwork.name)", c.node.NetworkNames()))
	}
	n, ok := c.node.Network(name)
	if !ok {
		return cniErr(types.ErrInvalidNetworkConfig, "", fmt.Errorf("%s: DataNetwork %q is not one this node carries (its node config's "+
			"networks: %s): put the port on one of them (the StackInstance's spec.ports[].dataNetwork), or have the platform add "+
			"the network to the node config (the chart renders its dataNetwork there)", from, name, c.node.NetworkNames()))
	}
	in.plan, in.granted, in.namespace = n, n.Grant(a.Pod.Namespace, nil), a.Pod.Namespace
	return nil
}

// planPolicies each refuse what the port's network does not allow, in order: its own
// addresses, the addresses it sends from, its VLANs, the MAC it asked for. Each is pure, and
// runs only with a plan (decideBinding).
var planPolicies = []func(*bindingInputs) error{planOwn, planSources, planVLANs, planMAC}

func planOwn(in *bindingInputs) error {
	for _, cl := range in.own {
		if p := in.plan.AddressProblem(cl.prefix, in.granted); p != "" {
			return in.refuse(cl.field, p)
		}
	}
	return nil
}

func planSources(in *bindingInputs) error {
	for _, cl := range in.extra {
		if p := in.plan.SourceProblem(cl.addr, in.granted); p != "" {
			return in.refuse(cl.field, p)
		}
	}
	return nil
}

func planVLANs(in *bindingInputs) error {
	for _, v := range in.vlans {
		if p := in.plan.VLANProblem(v.id); p != "" {
			return in.refuse(v.field, p)
		}
	}
	return nil
}

// planMAC holds a MAC the pod asked for to the network's prefix; the MAC fstack-cni derives is
// the network's own, whatever its policy.
func planMAC(in *bindingInputs) error {
	if in.askedMAC == "" {
		return nil
	}
	if p := in.plan.MACProblem(in.askedMAC); p != "" {
		return in.refuse(in.macField, p)
	}
	return nil
}

// refuse is a refusal of field by the network's plan, naming the namespace and the fix.
func (in *bindingInputs) refuse(field, problem string) error {
	return fmt.Errorf("%s: %s (pod namespace %s; the plan of DataNetwork %s as this node's config gives it): give the stack "+
		"what the network grants its namespace, or ask the platform's administrator for a grant", field, problem, in.namespace, in.plan.Name)
}
