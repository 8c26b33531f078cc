package plugin

import (
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Check verifies that what ADD made is still there: the port with the right type, socket, owner
// and tx steering (hash), its anti-spoofing rules, the pod directory and its device info, and
// the interface in prevResult.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	c, err := p.start(args.StdinData, "CHECK")
	if err != nil {
		return err
	}
	defer c.closer()
	a := newAttachment(c.conf, args, parseCNIArgs(args.Args))
	c.log = c.log.With(logging.KeyContainerID, a.ContainerID, logging.KeyIfname, a.IfName, logging.KeyPort, a.PortName)
	if a.PodDir != "" && c.skipped(a) {
		return c.logResult(nil)
	}
	if c.nodeErr != nil {
		return c.logResult(types.NewError(types.ErrInvalidNetworkConfig, "fstack-cni serves no pod on this node: "+c.nodeErr.Error(), ""))
	}
	if err := c.check(a); err != nil {
		return c.logResult(err)
	}
	// With static addresses (runtimeConfig.ips) ADD took no lease for IPAM to check.
	if c.conf.IPAM.Type != "" && len(c.conf.RuntimeConfig.IPs) == 0 {
		if err := p.IPAM.Check(c.ctx, c.conf.IPAM.Type, args.StdinData); err != nil {
			return c.logResult(cniErr(types.ErrInternal, "IPAM check failed", err))
		}
	}
	return c.logResult(nil)
}

func (c *command) check(a *attachment) error {
	if c.conf.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "CHECK needs prevResult", "")
	}
	port, err := c.ovs.findPort(c.ctx, a.PortName)
	if err != nil {
		return ovsErr(err)
	}
	if err := checkPort(port, a); err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	if err := checkTxSteering(port); err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	g, err := c.guardOfPort(port.Name, port.IDs)
	if err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	if err := c.flows.Check(c.ctx, g); err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	a.setPodDir(c.conf, filepath.Dir(port.Socket))
	if err := checkFiles(a); err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return checkPrevResult(c.conf, a)
}

func checkPort(port *portInfo, a *attachment) error {
	switch {
	case port == nil:
		return fmt.Errorf("OVS port %s of %s does not exist", a.PortName, describe(a))
	case port.Type != portType:
		return fmt.Errorf("OVS port %s has type %q, want %q", a.PortName, port.Type, portType)
	case port.IDs[podcontract.OVSIDContainerID] != a.ContainerID || port.IDs[podcontract.OVSIDIfName] != a.IfName:
		return fmt.Errorf("OVS port %s belongs to container %q interface %q", a.PortName, port.IDs[podcontract.OVSIDContainerID], port.IDs[podcontract.OVSIDIfName])
	case a.Socket != "" && port.Socket != a.Socket:
		return fmt.Errorf("OVS port %s uses socket %q, want %q", a.PortName, port.Socket, a.Socket)
	case filepath.Base(port.Socket) != podcontract.VhostSocketFile(a.IfName):
		return fmt.Errorf("OVS port %s uses socket %q, not one named after %s", a.PortName, port.Socket, a.IfName)
	}
	return nil
}

func checkPrevResult(conf *NetConf, a *attachment) error {
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "cannot convert prevResult", err.Error())
	}
	for _, iface := range prev.Interfaces {
		if iface.Name == a.IfName && iface.Sandbox == a.Netns {
			return nil
		}
	}
	return types.NewError(types.ErrInternal, fmt.Sprintf("prevResult has no interface %s in %s", a.IfName, a.Netns), "")
}
