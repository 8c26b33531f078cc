package plugin

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// Status reports whether an ADD could succeed now: OVSDB answers and the bridge is a netdev
// bridge. Anything else is the spec's "plugin not available", so the runtime holds pods back.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	c, err := p.start(args.StdinData, "STATUS")
	if err != nil {
		return err
	}
	defer c.closer()
	if err := c.ovs.checkBridge(c.ctx, c.conf.Bridge); err != nil {
		return c.logResult(types.NewError(types.ErrPluginNotAvailable, "fstack-cni not available: "+err.Error(), ""))
	}
	if c.conf.IPAM.Type != "" {
		if err := p.IPAM.Status(c.ctx, c.conf.IPAM.Type, args.StdinData); err != nil {
			return c.logResult(cniErr(types.ErrPluginNotAvailable, "IPAM plugin "+c.conf.IPAM.Type+" not available", err))
		}
	}
	return nil
}
