package nodetest

import (
	"os"
	"path/filepath"
)

// Node is what a node-tier test package runs against: a temp dir, hugepages for OVS and the
// test's own DPDK programs, and a private OVS-DPDK with a netdev bridge.
type Node struct {
	Tmp  string
	Huge *Hugepages
	OVS  *OVS
}

// StartNode checks the prerequisites, then reserves OVSPages+pages 2 MiB pages and starts OVS
// with bridge. Close undoes all of it, also after a partial start.
func StartNode(tmpPrefix, bridge string, pages int) (*Node, error) {
	if err := CheckPrereqs(); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", tmpPrefix)
	if err != nil {
		return nil, err
	}
	n := &Node{Tmp: tmp}
	if n.Huge, err = MountHugepages(filepath.Join(tmp, "huge"), OVSPages+pages); err != nil {
		n.Close()
		return nil, err
	}
	if n.OVS, err = StartOVS(filepath.Join(tmp, "ovs"), bridge, n.Huge); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Close stops OVS, gives the hugepages back and removes the temp dir.
func (n *Node) Close() {
	if n.OVS != nil {
		n.OVS.Stop()
	}
	if n.Huge != nil {
		n.Huge.Unmount()
	}
	_ = os.RemoveAll(n.Tmp)
}
