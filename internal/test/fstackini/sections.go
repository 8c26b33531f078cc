package fstackini

import (
	"fmt"
	"strconv"
	"strings"
)

var ifaceKeys = map[string]bool{
	"addr": true, "netmask": true, "broadcast": true, "gateway": true, "vip_addr": true, "ipfw_pr": true,
	"addr6": true, "prefix_len": true, "gateway6": true, "vip_addr6": true, "vip_prefix_len": true,
}

var portOnlyKeys = map[string]bool{"if_name": true, "lcore_list": true, "slave_port_list": true, "vip_ifname": true}

var vdevKeys = map[string]bool{"path": true, "queues": true, "queue_size": true, "mac": true, "cq": true}

var bondKeys = map[string]bool{"mode": true, "slave": true, "primary": true, "socket_id": true, "mac": true, "xmit_policy": true}

// numbered handles [portN], [vlanN], [vdevN] and [bondN]: F-Stack hands every section whose
// name starts with those words to their handler, and a non-integer rest is a parse error.
func (p *parser) numbered(section, name, value string) error {
	kind := section[:4]
	n, err := strconv.Atoi(section[4:])
	if err != nil || n < 0 {
		return fmt.Errorf("[%s]: %q is not a number, a parse error in F-Stack", section, section[4:])
	}
	switch kind {
	case "port":
		return p.port(n, name, value)
	case "vlan":
		return p.vlan(n, name, value)
	case "vdev":
		if _, ok := p.c.DPDK["nb_vdev"]; !ok {
			return fmt.Errorf("dpdk.nb_vdev must come first")
		}
		if n >= p.c.NbVdev {
			return fmt.Errorf("vdev %d is not below nb_vdev=%d: ignored", n, p.c.NbVdev)
		}
		return p.keyOf(p.c.Vdevs, n, name, value, vdevKeys)
	default:
		if _, ok := p.c.DPDK["nb_bond"]; !ok {
			return fmt.Errorf("dpdk.nb_bond must come first")
		}
		if n >= p.c.NbBond {
			return fmt.Errorf("bond %d is not below nb_bond=%d: ignored", n, p.c.NbBond)
		}
		return p.keyOf(p.c.Bonds, n, name, value, bondKeys)
	}
}

func (p *parser) keyOf(m map[int]map[string]string, n int, name, value string, keys map[string]bool) error {
	if !keys[name] {
		return fmt.Errorf("unknown key: F-Stack ignores it")
	}
	if m[n] == nil {
		m[n] = map[string]string{}
	}
	m[n][name] = value
	return nil
}

func (p *parser) port(n int, name, value string) error {
	if p.c.Lcores == nil {
		return fmt.Errorf("dpdk.lcore_mask must come before any [portN] key")
	}
	if p.c.PortList == nil {
		return fmt.Errorf("must config dpdk.port_list first")
	}
	if len(p.c.VLANs) > 0 {
		return fmt.Errorf("[portN] after a [vlanN]: the VLAN dereferenced a port not yet parsed")
	}
	if n > p.c.PortList[len(p.c.PortList)-1] {
		return fmt.Errorf("port %d is above the largest port in port_list: ignored", n)
	}
	p.portAny = true
	if p.c.Ports[n] == nil {
		p.c.Ports[n] = &Iface{Keys: map[string]string{}, LcoreList: p.c.Lcores}
	}
	if !ifaceKeys[name] && !portOnlyKeys[name] {
		return fmt.Errorf("unknown key: F-Stack ignores it")
	}
	return setIface(p.c.Ports[n], name, value)
}

func (p *parser) vlan(n int, name, value string) error {
	if p.c.VLANFilter == nil {
		return fmt.Errorf("dpdk.vlan_filter must come first")
	}
	if len(p.c.Ports) == 0 {
		return fmt.Errorf("[vlanN] before any [portN]: portid dereferences an empty port table")
	}
	if !containsInt(p.c.VLANFilter, n) {
		return fmt.Errorf("vlan %d is not in vlan_filter", n)
	}
	p.portAny = true
	if p.c.VLANs[n] == nil {
		p.c.VLANs[n] = &Iface{Keys: map[string]string{}, PortID: -1}
	}
	v := p.c.VLANs[n]
	if name == "portid" {
		id, err := strconv.Atoi(value)
		if err != nil || id > p.c.PortList[len(p.c.PortList)-1] {
			return fmt.Errorf("portid %q is not a configured port", value)
		}
		v.PortID = id
		return nil
	}
	if !ifaceKeys[name] {
		return fmt.Errorf("unknown key (if_name and vip_ifname are not supported in [vlanN]): F-Stack ignores it")
	}
	return setIface(v, name, value)
}

func setIface(f *Iface, name, value string) error {
	f.Keys[name] = value
	var err error
	switch name {
	case "lcore_list":
		f.LcoreList, err = parseList(value)
	case "slave_port_list":
		f.Slaves, err = parseList(value)
	case "vip_addr":
		f.VIPs, err = splitVIPs(value)
	case "vip_addr6":
		f.VIPs6, err = splitVIPs(value)
	case "ipfw_pr":
		f.IPFW = strings.Split(value, ";")
	}
	return err
}

// splitVIPs splits a ';' list; F-Stack skips entries with blanks and drops those past 64.
func splitVIPs(s string) ([]string, error) {
	parts := strings.Split(s, ";")
	if len(parts) > 64 {
		return nil, fmt.Errorf("%d VIPs: F-Stack keeps the first 64", len(parts))
	}
	for _, v := range parts {
		if v == "" || strings.ContainsAny(v, " \t") {
			return nil, fmt.Errorf("VIP %q would be skipped", v)
		}
	}
	return parts, nil
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
