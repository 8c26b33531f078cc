package plugin

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// buildResult appends this attachment's interface and IPs to the previous result when chained,
// so the default network's eth0 stays the runtime's view of the pod.
func buildResult(conf *NetConf, a *attachment, ipam *current.Result) (*current.Result, error) {
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	if conf.PrevResult != nil {
		prev, err := current.NewResultFromResult(conf.PrevResult)
		if err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "cannot convert prevResult", err.Error())
		}
		res = prev
	}
	idx := len(res.Interfaces)
	res.Interfaces = append(res.Interfaces, &current.Interface{
		Name: a.IfName, Mac: a.MAC, Mtu: conf.MTU, Sandbox: a.Netns, SocketPath: a.Socket,
	})
	if ipam == nil {
		return res, nil
	}
	for _, ip := range ipam.IPs {
		ip := *ip
		ip.Interface = current.Int(idx)
		res.IPs = append(res.IPs, &ip)
	}
	res.Routes = append(res.Routes, ipam.Routes...)
	if len(res.DNS.Nameservers) == 0 {
		res.DNS = ipam.DNS
	}
	return res, nil
}

func deviceInfo(conf *NetConf, a *attachment, ipam *current.Result, switchCPUs []int) *podcontract.DevInfo {
	info := &podcontract.DevInfo{
		Type: podcontract.DevInfoTypeVhostUser, Version: podcontract.DevInfoVersion,
		VhostUser: &podcontract.DevInfoVhostUser{Mode: podcontract.VhostUserModeServer, Path: a.PodSocket},
		MAC:       a.MAC, MTU: conf.MTU, SwitchCPUs: switchCPUs,
		Attachment: &podcontract.DevInfoAttachment{Network: a.Network, ContainerID: a.ContainerID, IfName: a.IfName, PodUID: a.Pod.UID},
	}
	if ipam == nil {
		return info
	}
	for _, ip := range ipam.IPs {
		info.IPs = append(info.IPs, ip.Address.String())
		if info.Gateway == "" && ip.Gateway != nil {
			info.Gateway = ip.Gateway.String()
		}
	}
	return info
}

func describe(a *attachment) string {
	return fmt.Sprintf("container %s interface %s", a.ContainerID, a.IfName)
}
