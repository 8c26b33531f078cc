package plugin

import (
	"fmt"

	"github.com/kube-fstack/kube-fstack/internal/ovsdb"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// OVS-DPDK's PMD threads busy-poll the CPUs of other_config:pmd-cpu-mask, and a dataplane lcore
// that shares one of them gets half of it. The pod cannot read OVSDB, so ADD reads the mask in
// the transaction that makes the port (the select of the Open_vSwitch row that also reads
// ovs_version: no round trip of its own) and hands its CPUs to the dataplane in the device info
// (SwitchCPUs).
const otherConfigPMDCPUMask = "pmd-cpu-mask"

// switchFacts is what ADD's transaction reads of the switch itself, from its Open_vSwitch row.
type switchFacts struct {
	version    string // ovs_version
	pmdCPUMask string // other_config:pmd-cpu-mask; "" when OVS picks its PMD cores itself
}

// switchFactsOf reads a select of the one-row Open_vSwitch table. ovs-ctl (the packaged start
// script) sets ovs_version; an OVS started otherwise may leave it empty. A column the row lacks
// reads as unset: neither fact is worth failing an ADD for.
func switchFactsOf(rows []ovsdb.Row) switchFacts {
	if len(rows) == 0 {
		return switchFacts{}
	}
	var f switchFacts
	f.version, _ = rows[0].String("ovs_version")
	if other, err := rows[0].Map("other_config"); err == nil {
		f.pmdCPUMask = other[otherConfigPMDCPUMask]
	}
	return f
}

// switchCPUs is the device info's SwitchCPUs for mask. A mask that does not parse is the node's
// mistake, not the pod's: the ADD goes on (the pod works, with lcores that may share the PMDs'
// CPUs) and the log says so.
func (c *command) switchCPUs(mask string) []int {
	cpus, err := podcontract.ParseCPUMask(mask)
	if err != nil {
		c.log.Warn(fmt.Sprintf("OVS other_config:%s %q is not a CPU mask (%v): the device info names no switch CPUs, so the "+
			"dataplane cannot keep its lcores off the switch's PMD threads, and an lcore on a PMD's CPU gets half of it; "+
			"set a hex mask of the CPUs OVS polls on (`ovs-vsctl set Open_vSwitch . other_config:%s=0x2`)",
			otherConfigPMDCPUMask, mask, err, otherConfigPMDCPUMask), "pmdCPUMask", mask)
		return nil
	}
	return cpus
}
