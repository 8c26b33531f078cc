package fstackini

import (
	"fmt"
	"strings"
)

// check is ff_check_config plus the start-up failures of ff_dpdk_init that the file decides.
func (c *Config) check() error {
	if c.Lcores == nil {
		return &Error{Msg: "no lcore_mask: nb_procs is 0"}
	}
	if c.PortList == nil {
		return &Error{Msg: "no port_list"}
	}
	served := map[int]bool{}
	for _, id := range c.PortList {
		pt := c.Ports[id]
		if pt == nil {
			return &Error{Msg: fmt.Sprintf("port %d in port_list has no [port%d] section", id, id)}
		}
		for _, k := range []string{"addr", "netmask", "broadcast", "gateway"} {
			if pt.Keys[k] == "" {
				return &Error{Msg: fmt.Sprintf("port%d if config error: no %s", id, k)}
			}
		}
		for _, l := range pt.LcoreList {
			if !containsInt(c.Lcores, l) {
				return &Error{Msg: fmt.Sprintf("port%d: lcore %d is not enabled in lcore_mask", id, l)}
			}
			served[l] = true
		}
	}
	for _, l := range c.Lcores {
		if !served[l] {
			return &Error{Msg: fmt.Sprintf("lcore %d has nothing to do", l)}
		}
	}
	for i := 0; i < c.NbVdev; i++ {
		if c.Vdevs[i]["path"] == "" {
			return &Error{Msg: fmt.Sprintf("[vdev%d] missing or without path", i)}
		}
	}
	for i := 0; i < c.NbBond; i++ {
		if c.Bonds[i]["slave"] == "" {
			return &Error{Msg: fmt.Sprintf("[bond%d] missing or without slave", i)}
		}
	}
	for id, v := range c.VLANs {
		if v.PortID < 0 {
			return &Error{Msg: fmt.Sprintf("[vlan%d] has no portid", id)}
		}
	}
	return c.checkKNI()
}

func (c *Config) checkKNI() error {
	if c.KNI == nil || c.KNI["enable"] != "1" {
		return nil
	}
	switch strings.ToLower(c.KNI["method"]) {
	case "accept", "reject":
	default:
		return &Error{Msg: fmt.Sprintf("kni method %q is not accept or reject", c.KNI["method"])}
	}
	if a, ok := c.KNI["kni_action"]; ok {
		switch strings.ToLower(a) {
		case "alltokni", "alltoff", "default":
		default:
			return &Error{Msg: fmt.Sprintf("kni_action %q is not alltokni, alltoff or default", a)}
		}
	}
	// The primary (explicit --proc-type=primary) must serve every port when KNI is on.
	for _, id := range c.PortList {
		if !containsInt(c.Ports[id].LcoreList, c.Lcores[0]) {
			return &Error{Msg: fmt.Sprintf("kni: primary lcore %d is not in port%d's lcore_list", c.Lcores[0], id)}
		}
	}
	return nil
}
