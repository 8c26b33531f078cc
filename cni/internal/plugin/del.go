package plugin

import (
	"errors"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/logging"
)

// Del removes the port, the files and the IPAM lease. Whatever is already gone is success: the
// runtime retries a failed DEL forever. The one failure it reports is an unreachable OVSDB, since
// the port may still exist and a retry is what removes it.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	c, err := p.start(args.StdinData, "DEL")
	if err != nil {
		return err
	}
	defer c.closer()
	pod := parseCNIArgs(args.Args)
	if validPodUID(pod.UID) != nil {
		pod.UID = "" // DEL never fails on its arguments; the port tells where the files are
	}
	a := newAttachment(c.conf, args, pod)
	c.log = c.log.With(logging.KeyContainerID, a.ContainerID, logging.KeyIfname, a.IfName, logging.KeyPort, a.PortName)
	// A chained pod ADD left alone has nothing here to remove. Without this, every pod's DEL on
	// a node without OVS (a control plane the chain reaches too) failed on the unreachable OVSDB
	// and no pod there could ever stop. The pod's emptyDir outlives its sandbox, so an F-Stack
	// pod is never taken for another here.
	if pod.UID != "" && c.skipped(a) {
		return nil
	}
	return c.logResult(p.del(c, a, args.StdinData))
}

func (p *Plugin) del(c *command, a *attachment, stdin []byte) error {
	port, portErr := c.ovs.removePortForDel(c.ctx, a.PortName)
	if port == nil || !numberedByADD(port) {
		// A port ADD numbered keeps its rules on its number, where they match no port once it
		// is gone and the ADD that gives the number again replaces them (ofport.go): DEL need
		// not wait for ovs-vswitchd, which is busy removing the port. Rules on a number OVS
		// chose (an older fstack-cni's port, or one OVS numbered otherwise than it asked) go
		// now, since OVS may give that number to any port.
		c.unguard(a.PortName)
	}
	if port != nil && port.Socket != "" {
		a.setPodDirOfPort(c.conf, port.Socket)
		if a.podDirErr != nil {
			c.log.Error("pod directory left alone", "socket", port.Socket, logging.KeyErr, a.podDirErr)
		}
	}
	errs := []error{removeFiles(a)}
	if c.conf.IPAM.Type != "" {
		errs = append(errs, p.ipamDel(c, a, stdin))
	}
	errs = append(errs, portErr)
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	if errors.Is(err, errOVSDBUnreachable) {
		return cniErr(types.ErrTryAgainLater, "cannot remove the OVS port of "+describe(a)+": "+err.Error(), err)
	}
	return cniErr(types.ErrInternal, "DEL of "+describe(a)+" incomplete: "+err.Error(), err)
}

// unguard removes a removed port's anti-spoofing rules. A failure is logged, not returned: the
// rules match only the port's old ofport, and the ADD of the next port given that number
// replaces them; failing DEL for them would have the runtime retry it forever.
func (c *command) unguard(port string) {
	g := &guard{OVSDB: c.conf.OVSDBSocket, Bridge: c.conf.Bridge, Port: port}
	if err := c.flows.Unguard(c.ctx, g); err != nil {
		c.log.Error("anti-spoofing rules left on the bridge", logging.KeyPort, port, logging.KeyErr, err)
	}
}

// ipamDel waits for any IPAM ADD of this attachment still running (see lockIPAM) before asking
// IPAM to release the lease. Without the lock it still releases: DEL must make progress.
func (p *Plugin) ipamDel(c *command, a *attachment, stdin []byte) error {
	ctx := c.ctx
	if lock, err := lockIPAM(c.conf.SocketRoot, a.PortName); err != nil {
		c.log.Error("releasing the lease without the IPAM lock", logging.KeyErr, err)
	} else {
		defer lock.Close()
		ctx = inheritLock(ctx, lock)
	}
	return p.IPAM.Del(ctx, c.conf.IPAM.Type, stdin)
}

// numberedByADD says whether the port has the number its ADD requested from the plugin's range
// (or none yet), so its rules are on that number.
func numberedByADD(p *portInfo) bool {
	return inRange(p.Requested) && (p.OFPort <= 0 || p.OFPort == p.Requested)
}
