package plugin

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// GC removes the ports and files of this network's attachments that are not in the valid
// list, including files a killed ADD left without a port, then lets IPAM collect its leases.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	c, err := p.start(args.StdinData, "GC")
	if err != nil {
		return err
	}
	defer c.closer()
	valid := map[string]bool{}
	for _, v := range c.conf.ValidAttachments {
		valid[v.ContainerID+"/"+v.IfName] = true
	}
	errs := []error{c.gcPorts(valid), c.gcFiles(valid)}
	if c.conf.IPAM.Type != "" {
		errs = append(errs, p.IPAM.GC(c.ctx, c.conf.IPAM.Type, args.StdinData))
	}
	if err := errors.Join(errs...); err != nil {
		return c.logResult(cniErr(types.ErrInternal, "GC incomplete: "+err.Error(), err))
	}
	return c.logResult(nil)
}

func (c *command) gcPorts(valid map[string]bool) error {
	ports, err := c.ovs.listPorts(c.ctx, c.conf.Name)
	if err != nil {
		return err
	}
	var errs []error
	for _, port := range ports {
		cid, ifname := port.IDs[podcontract.OVSIDContainerID], port.IDs[podcontract.OVSIDIfName]
		if valid[cid+"/"+ifname] {
			continue
		}
		c.log.Info("collecting port", logging.KeyPort, port.Name, logging.KeyContainerID, cid, logging.KeyIfname, ifname)
		errs = append(errs, c.ovs.deletePort(c.ctx, port.Name))
		c.unguard(port.Name)
		if port.Socket != "" {
			errs = append(errs, c.gcPortFiles(port.Socket, cid, ifname))
		}
	}
	return errors.Join(errs...)
}

// gcPortFiles removes the files of a collected port where its socket says they are, once its
// names pass ADD's checks and the socket is <socketRoot>/<pod>/<ifname>.sock.
func (c *command) gcPortFiles(socket, cid, ifname string) error {
	err := validPortNames(cid, ifname)
	a := newAttachment(c.conf, &skel.CmdArgs{ContainerID: cid, IfName: ifname}, podArgs{})
	if err == nil {
		a.setPodDirOfPort(c.conf, socket)
		err = a.podDirErr
	}
	if err != nil {
		c.log.Error("port files left alone", "socket", socket, logging.KeyErr, err)
		return nil
	}
	return removeFiles(a)
}

// gcFiles finds attachments by the device info in each pod's emptyDir (through the pod's link,
// opened beneath the kubelet root) and in each pod directory of the hostPath layout the plugin
// made (marked), then removes the links and directories left without any (under the root lock,
// an ADD never leaves one so). A link whose emptyDir is gone (the kubelet removed the pod) goes
// whatever it held. What a pod planted in its own directory is logged and left: it is not acted
// on, and the directory is the pod's to fill.
func (c *command) gcFiles(valid map[string]bool) error {
	rd, err := fsutil.OpenDir(c.conf.SocketRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rd.Close()
	names, err := rd.Names()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if validPodUID(name) != nil {
			continue
		}
		if isLink(rd, name) {
			errs = append(errs, c.gcLink(name, valid))
			continue
		}
		pd, err := rd.OpenDir(name) // not a directory: not a pod directory
		if err != nil {
			continue
		}
		if isRegular(pd, PodDirMarker) { // else not made by the plugin: its files are not ours either
			errs = append(errs, c.gcPodDir(pd, name, valid))
		}
		pd.Close()
	}
	return errors.Join(errs...)
}

// gcLink collects the stale attachments of the pod's emptyDir, then its link.
func (c *command) gcLink(name string, valid map[string]bool) error {
	link := &attachment{}
	link.setPodDir(c.conf, filepath.Join(c.conf.SocketRoot, name))
	var errs []error
	if vd, err := openVolume(link); err == nil {
		names, err := vd.Names()
		errs = append(errs, err)
		for _, f := range jsonFiles(names) {
			errs = append(errs, c.gcFile(vd, f, link.PodDir, valid))
		}
		vd.Close()
	}
	return errors.Join(append(errs, withRootLock(c.conf.SocketRoot, func(rd *fsutil.Dir) error {
		return unlinkUnlessHeld(rd, link)
	}))...)
}

func (c *command) gcPodDir(pd *fsutil.Dir, name string, valid map[string]bool) error {
	names, err := pd.Names()
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range jsonFiles(names) {
		errs = append(errs, c.gcFile(pd, f, pd.Path(), valid))
	}
	return errors.Join(append(errs, withRootLock(c.conf.SocketRoot, func(rd *fsutil.Dir) error {
		return removePodDir(rd, pd, name, false)
	}))...)
}

// gcFile removes the files of the attachment file in pd names when it is stale; podDir is the
// pod's place in the socket root (its link, or its old directory).
func (c *command) gcFile(pd *fsutil.Dir, file, podDir string, valid map[string]bool) error {
	info, err := podcontract.ReadDevInfoIn(pd, file)
	if err != nil || info.Attachment == nil || info.Attachment.Network != c.conf.Name {
		return nil // not ours to judge
	}
	at := info.Attachment
	if err := validAttachment(at, file, podDir); err != nil {
		c.log.Error("device info left alone: not one the plugin wrote", "file", pd.Join(file), logging.KeyErr, err)
		return nil
	}
	if valid[at.ContainerID+"/"+at.IfName] {
		return nil
	}
	c.log.Info("collecting files", "dir", pd.Path(), logging.KeyContainerID, at.ContainerID, logging.KeyIfname, at.IfName)
	a := newAttachment(c.conf, &skel.CmdArgs{ContainerID: at.ContainerID, IfName: at.IfName}, podArgs{})
	a.setPodDir(c.conf, podDir)
	return removeFiles(a)
}
