package plugin

import (
	"errors"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/kube-fstack/kube-fstack/cni/internal/cnimain"

	"github.com/kube-fstack/kube-fstack/cni/pkg/devinfo"
)

// GC removes the ports and files of this network's attachments that are not in the valid
// list, including files a killed ADD left without a port, then lets IPAM collect its leases.
func (p *Plugin) GC(args *cnimain.CmdArgs) error {
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
		cid, ifname := port.IDs[idContainerID], port.IDs[idIfName]
		if valid[cid+"/"+ifname] {
			continue
		}
		c.log.Info("collecting port", "port", port.Name, "container", cid, "ifname", ifname)
		errs = append(errs, c.ovs.deletePort(c.ctx, port.Name))
		if port.Socket != "" {
			a := newAttachment(c.conf, &cnimain.CmdArgs{ContainerID: cid, IfName: ifname}, podArgs{})
			a.setPodDir(c.conf, filepath.Dir(port.Socket))
			errs = append(errs, removeFiles(c.conf.SocketRoot, a))
		}
	}
	return errors.Join(errs...)
}

// gcFiles finds attachments by the device info in each pod directory; empty pod directories go
// too (under the root lock, an ADD never leaves one empty).
func (c *command) gcFiles(valid map[string]bool) error {
	dirs, err := podDirs(c.conf.SocketRoot)
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, f := range files {
			errs = append(errs, c.gcFile(valid, dir, f))
		}
		errs = append(errs, withRootLock(c.conf.SocketRoot, func() error {
			removeStaleTemps(dir)
			return removeDirIfEmpty(dir)
		}))
	}
	return errors.Join(errs...)
}

func (c *command) gcFile(valid map[string]bool, dir, file string) error {
	info, err := devinfo.Read(file)
	if err != nil || info.Attachment == nil || info.Attachment.Network != c.conf.Name {
		return nil // not ours to judge
	}
	at := info.Attachment
	if valid[at.ContainerID+"/"+at.IfName] {
		return nil
	}
	c.log.Info("collecting files", "dir", dir, "container", at.ContainerID, "ifname", at.IfName)
	a := newAttachment(c.conf, &cnimain.CmdArgs{ContainerID: at.ContainerID, IfName: at.IfName}, podArgs{})
	a.setPodDir(c.conf, dir)
	return removeFiles(c.conf.SocketRoot, a)
}
