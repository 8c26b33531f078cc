package nodecheck

import (
	"context"
	"errors"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// The bridge's kernel-side ports are judged by their senders: a veth port's other end, an
// internal (tap) port itself. Offload on, or a sender the agent cannot see, is a warning with
// the fix; it never takes a label away (vhost-user pods still run).
func TestKernelTCPChecksum(t *testing.T) {
	veth := func(idx int, name string, peer int) Link {
		return Link{Index: idx, Name: name, Kind: "veth", PeerIndex: peer}
	}
	cases := []struct {
		name       string
		ports      []string
		links      []Link
		linksErr   error
		status     Status
		detail     []string
		fix        string
		fixAbsent  bool
		fixNotWith string
	}{
		{name: "no kernel ports", status: Pass, detail: []string{"no kernel-side ports on the bridge"}, fixAbsent: true},
		{name: "veth peer with offload on", ports: []string{"fsk-node-o"},
			links:  []Link{veth(7, "fsk-node-o", 8), func() Link { l := veth(8, "fsk-node", 7); l.TxChecksum = true; return l }()},
			status: Warn, detail: []string{"tx checksum offload on: fsk-node (peer of port fsk-node-o)"},
			fix: "ethtool -K <sender> tx off for fsk-node (kernel-stack TCP"},
		{name: "veth peer with offload off", ports: []string{"fsk-node-o"},
			links:  []Link{func() Link { l := veth(7, "fsk-node-o", 8); l.TxChecksum = true; return l }(), veth(8, "fsk-node", 7)},
			status: Pass, detail: []string{"tx checksum offload off: fsk-node (peer of port fsk-node-o)"}, fixAbsent: true},
		{name: "internal port on", ports: []string{"br-fstack"},
			links:  []Link{{Index: 3, Name: "br-fstack", Kind: "tun", TxChecksum: true}},
			status: Warn, detail: []string{"tx checksum offload on: br-fstack"}, fix: "for br-fstack"},
		{name: "internal port off, a NIC", ports: []string{"br-fstack", "eth1"},
			links:  []Link{{Index: 3, Name: "br-fstack", Kind: "tun"}, {Index: 4, Name: "eth1", TxChecksum: true}},
			status: Pass, detail: []string{"br-fstack", "eth1 (a NIC: its traffic comes from the wire)"}, fixAbsent: true},
		{name: "port in another namespace", ports: []string{"fsk-node-o"},
			links:  []Link{{Index: 1, Name: "lo"}},
			status: Warn, detail: []string{"not in the node's network namespace, not checked: fsk-node-o"}, fix: "ethtool -k <sender>"},
		{name: "veth peer in another namespace", ports: []string{"veth1"},
			links:  []Link{{Index: 9, Name: "veth1", Kind: "veth", PeerIndex: 2, PeerElsewhere: true}, {Index: 2, Name: "eth0"}},
			status: Warn, detail: []string{"veth1 (its veth peer is in another network namespace)"}, fix: "ethtool -k <sender>"},
		{name: "ethtool refused", ports: []string{"br-fstack"},
			links:  []Link{{Index: 3, Name: "br-fstack", Kind: "tun", TxErr: errors.New("operation not supported")}},
			status: Warn, detail: []string{"br-fstack (operation not supported)"}},
		{name: "both on and unseen", ports: []string{"a-o", "b-o"},
			links:  []Link{veth(1, "a-o", 2), func() Link { l := veth(2, "a", 1); l.TxChecksum = true; return l }()},
			status: Warn, detail: []string{"tx checksum offload on: a (peer of port a-o)", "not checked: b-o"},
			fix: "for a ", fixNotWith: "ethtool -k <sender>"},
		{name: "no interface list", ports: []string{"a-o"}, linksErr: errors.New("EPERM"),
			status: Warn, detail: []string{"cannot list the node's interfaces: EPERM"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			n.ovs.facts.KernelPorts = tc.ports
			n.links.links, n.links.err = tc.links, tc.linksErr
			r := Run(context.Background(), &n.cfg)
			c := check(t, r, "kernel-tcp-checksum")
			if c.Status != tc.status {
				t.Errorf("status %s, want %s: %+v", c.Status, tc.status, c)
			}
			for _, d := range tc.detail {
				if !strings.Contains(c.Detail, d) {
					t.Errorf("detail %q lacks %q", c.Detail, d)
				}
			}
			if tc.fixAbsent && c.Fix != "" {
				t.Errorf("a passing check has a fix: %q", c.Fix)
			}
			if !strings.Contains(c.Fix, tc.fix) || (tc.fixNotWith != "" && strings.Contains(c.Fix, tc.fixNotWith)) {
				t.Errorf("fix %q, want it to name %q (and not %q)", c.Fix, tc.fix, tc.fixNotWith)
			}
			if c.Status == Warn && !strings.Contains(c.Fix, "drops it") {
				t.Errorf("fix %q does not say why", c.Fix)
			}
			if r.Labels[fsv1.NodeLabelVhostUser] != fsv1.NodeReady || len(r.Labels) != 8 {
				t.Errorf("the check changed the labels: %v", r.Labels)
			}
		})
	}
}

func TestUserspaceTSOIsReported(t *testing.T) {
	n := newNode(t)
	if c := check(t, Run(context.Background(), &n.cfg), "ovs-userspace-tso"); c.Status != Pass || c.Detail != "other_config:userspace-tso-enable=false (unset)" {
		t.Errorf("unset: %+v", c)
	}
	n.ovs.facts.UserspaceTSO = "true"
	if c := check(t, Run(context.Background(), &n.cfg), "ovs-userspace-tso"); c.Detail != "other_config:userspace-tso-enable=true" {
		t.Errorf("set: %+v", c)
	}
}

// Without a usable bridge the kernel-TCP checks say they did not run; the bridge checks carry
// the failure and its fix.
func TestKernelTCPNotCheckedWithoutBridge(t *testing.T) {
	n := newNode(t)
	n.ovs.found = false
	r := Run(context.Background(), &n.cfg)
	for _, name := range []string{"kernel-tcp-checksum", "ovs-userspace-tso"} {
		if c := check(t, r, name); c.Status != Warn || !strings.HasPrefix(c.Detail, "not checked") {
			t.Errorf("%s = %+v, want a warning that it was not checked", name, c)
		}
	}
}
