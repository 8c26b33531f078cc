package plugin

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Add creates the OVS port, then links the pod's emptyDir into the socket root and writes the
// device info, after running IPAM. Every step registers its undo; any failure runs them in
// reverse, so a failed ADD leaves no port, no link and no IPAM lease.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	c, err := p.start(args.StdinData, "ADD")
	if err != nil {
		return err
	}
	defer c.closer()
	a, err := c.addAttachment(args)
	if err != nil {
		return c.logResult(err, logging.KeyContainerID, args.ContainerID, logging.KeyIfname, args.IfName)
	}
	c.log = c.log.With(logging.KeyContainerID, a.ContainerID, logging.KeyIfname, a.IfName, logging.KeyPort, a.PortName,
		logging.KeyNamespace, a.Pod.Namespace, logging.KeyPod, a.Pod.Name)
	if c.skipped(a) {
		return types.PrintResult(c.conf.PrevResult, c.conf.CNIVersion)
	}
	res, err := p.add(c, a, args.StdinData)
	if err != nil {
		return c.logResult(err)
	}
	c.log.Info("done", "socket", a.Socket)
	return types.PrintResult(res, c.conf.CNIVersion)
}

// skipped says whether a is left alone: with skipUnprepared, in a chain, a pod that has no
// emptyDir is not an F-Stack pod (the chain runs for every pod of the node).
func (c *command) skipped(a *attachment) bool {
	// A chain's previous plugin's result: decoded for ADD, left raw for DEL (parsePrevResult).
	chained := c.conf.PrevResult != nil || c.conf.RawPrevResult != nil
	if !c.conf.SkipUnprepared || !chained || !errors.Is(checkVolume(a), fs.ErrNotExist) {
		return false
	}
	c.log.Info("skipped: the pod has no emptyDir "+podcontract.VhostVolume+" (skipUnprepared)", "volume", a.Volume)
	return true
}

func (c *command) addAttachment(args *skel.CmdArgs) (*attachment, error) {
	pod := parseCNIArgs(args.Args)
	if err := validPodUID(pod.UID); err != nil {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	a := newAttachment(c.conf, args, pod)
	if err := a.checkSocketPath(); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	return a, nil
}

func (p *Plugin) add(c *command, a *attachment, stdin []byte) (res *current.Result, err error) {
	var undo []func() error
	defer func() {
		if err != nil {
			c.rollback(undo)
		}
	}()
	if err := c.admit(a); err != nil {
		return nil, err
	}
	ipamRes, err := p.ipamAdd(c, a, stdin, &undo)
	if err != nil {
		return nil, err
	}
	if a.Binding, a.claims, err = c.binding(a, stdin, ipamRes); err != nil {
		return nil, err
	}
	res, err = buildResult(c.conf, a, ipamRes)
	if err != nil {
		return nil, err
	}
	// The rules first, on the number the port will ask for: the port is guarded from its first
	// frame, and ovs-vswitchd, which has not heard of the port yet, answers at once.
	ofport, unlock, err := c.guardNewPort(a, &undo)
	if err != nil {
		return nil, cniErr(types.ErrInternal, "set the port's anti-spoofing rules", err)
	}
	undo = append(undo, func() error { return c.ovs.deletePort(c.ctx, a.PortName) })
	sw, err := c.createPort(a, ofport)
	unlock()
	if err != nil {
		return nil, c.portErr(a, ofport, err)
	}
	// The files follow the port because the device info carries what the port's transaction read
	// of the switch. OVS, the socket's client, keeps reconnecting until the pod's DPDK serves it,
	// so a port whose link is not there yet costs nothing.
	undo = append(undo, func() error { return removeFiles(a) })
	if err := writeFiles(c.conf.SocketRoot, a, deviceInfo(c.conf, a, ipamRes, c.switchCPUs(sw.pmdCPUMask))); err != nil {
		return nil, cniErr(types.ErrIOFailure, "write the attachment's files", err)
	}
	return res, nil
}

// portErr is the error of a port transaction that failed.
func (c *command) portErr(a *attachment, ofport int64, err error) error {
	switch {
	case isClaimWait(err):
		return c.claimHolder(a)
	case isOFPortWait(err):
		// Only a client that does not take the socket root's lock can have taken it meanwhile.
		return cniErr(types.ErrTryAgainLater, "", fmt.Errorf("another OVS client took OpenFlow port number %d while this port was being made: try again", ofport))
	}
	return ovsErr(err)
}

// admit refuses, before anything is taken, a pod of a namespace the node does not serve (or a
// node without its node config), a pod the injector did not prepare (no emptyDir to serve its
// socket from) and an ADD whose port could not be made: connecting needs no round trip and
// fails at once when ovsdb-server is down, so such an ADD does not take a lease first.
func (c *command) admit(a *attachment) error {
	if err := c.servable(a); err != nil {
		return err
	}
	if err := checkVolume(a); err != nil {
		return cniErr(types.ErrIOFailure, "", err)
	}
	if err := c.ovs.connect(c.ctx); err != nil {
		return ovsErr(err)
	}
	return nil
}

// createPort makes the port in one round trip in the usual case. The server refuses the
// transaction whole when the bridge is missing or not netdev, or when a port of the same name
// (and so the same UUID) is left from an earlier ADD of this attachment; only then are more
// round trips spent: to say which bridge mistake it is, or to remove the stale port in a
// transaction of its own (OVS keeps the old socket path when delete and add share one) and
// insert again. It returns what the transaction read of the switch.
func (c *command) createPort(a *attachment, ofport int64) (switchFacts, error) {
	spec := a.portSpec(c.conf.MTU)
	spec.OFPort = ofport
	sw, err := c.ovs.addPort(c.ctx, c.conf.Bridge, spec)
	switch {
	case isOrphanWait(err):
		if err := c.removeOrphanPorts(a); err != nil {
			return sw, err
		}
		sw, err = c.ovs.addPort(c.ctx, c.conf.Bridge, spec)
	case isClaimWait(err), isOFPortWait(err):
		return sw, err // portErr says why
	case ovsdb.IsConditionFailed(err):
		if berr := c.ovs.checkBridge(c.ctx, c.conf.Bridge); berr != nil {
			return sw, berr
		}
		return sw, err // the bridge was fixed meanwhile; the runtime retries
	case ovsdb.IsConstraintViolation(err) || ovsdb.IsDuplicateUUID(err):
		if err := c.ovs.deletePort(c.ctx, a.PortName); err != nil {
			return sw, err
		}
		sw, err = c.ovs.addPort(c.ctx, c.conf.Bridge, spec)
	}
	if err == nil {
		c.warnOldOVS(a, sw.version)
	}
	return sw, err
}

func (p *Plugin) ipamAdd(c *command, a *attachment, stdin []byte, undo *[]func() error) (*current.Result, error) {
	if len(c.conf.RuntimeConfig.IPs) > 0 {
		// The runtime (Multus, from the pod's networks entry) gives the port's static
		// addresses: the dataplane serves those, so a lease would be an address nobody
		// answers on, and reporting it would tell network-status the wrong address.
		ips, err := c.conf.staticIPs()
		if err != nil {
			return nil, cniErr(types.ErrInvalidNetworkConfig, "", err)
		}
		c.log.Info("static addresses from runtimeConfig.ips: no IPAM", "ips", c.conf.RuntimeConfig.IPs)
		return &current.Result{CNIVersion: current.ImplementedSpecVersion, IPs: ips}, nil
	}
	if c.conf.IPAM.Type == "" {
		return nil, nil
	}
	lock, err := lockIPAM(c.conf.SocketRoot, a.PortName)
	if err != nil {
		return nil, cniErr(types.ErrIOFailure, "lock the attachment's IPAM", err)
	}
	defer lock.Close()
	// Registered before the call: an IPAM plugin that fails half-way may still hold a lease.
	*undo = append(*undo, func() error { return p.IPAM.Del(c.ctx, c.conf.IPAM.Type, stdin) })
	r, err := p.IPAM.Add(inheritLock(c.ctx, lock), c.conf.IPAM.Type, stdin)
	if err != nil {
		return nil, cniErr(types.ErrInternal, "IPAM plugin "+c.conf.IPAM.Type+" failed", err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		return nil, cniErr(types.ErrDecodingFailure, "IPAM result", err)
	}
	return res, nil
}

func (c *command) rollback(undo []func() error) {
	for i := len(undo) - 1; i >= 0; i-- {
		if err := undo[i](); err != nil {
			c.log.Error("rollback step failed; DEL or GC will finish it", logging.KeyErr, err)
		}
	}
}

// ovsErr maps OVS failures to the spec's codes: configuration mistakes are permanent, an
// unreachable OVSDB is worth retrying.
func ovsErr(err error) error {
	switch {
	case errors.Is(err, errBridgeMissing), errors.Is(err, errBridgeNotNetdev):
		return cniErr(types.ErrInvalidNetworkConfig, "", err)
	case errors.Is(err, errOVSDBUnreachable):
		return cniErr(types.ErrTryAgainLater, "", err)
	}
	return cniErr(types.ErrInternal, "OVSDB", err)
}
