package antispoof

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/kube-fstack/kube-fstack/cni/internal/openflow"
)

// The ovs-ofctl input is exactly what fstack-cni set before the rules moved here (issue 31 will
// change what they match; until then a restart must bring back the same rules).
func TestOfctlIsUnchanged(t *testing.T) {
	rules, err := Rules("fsk0123456789ab", "02:AA:bb:cc:dd:ee")
	if err != nil {
		t.Fatal(err)
	}
	want := `delete cookie=0x36a169c56b77279e/-1
delete in_port=7
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,arp,arp_sha=02:aa:bb:cc:dd:ee,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,icmp6,icmp_type=135,icmp_code=0,nd_sll=02:aa:bb:cc:dd:ee,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,icmp6,icmp_type=135,icmp_code=0,nd_sll=00:00:00:00:00:00,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,icmp6,icmp_type=136,icmp_code=0,nd_tll=02:aa:bb:cc:dd:ee,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=40,icmp6,icmp_type=136,icmp_code=0,nd_tll=00:00:00:00:00:00,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,priority=30,arp,actions=drop
add cookie=0x36a169c56b77279e,table=0,in_port=7,priority=30,icmp6,icmp_type=135,icmp_code=0,actions=drop
add cookie=0x36a169c56b77279e,table=0,in_port=7,priority=30,icmp6,icmp_type=136,icmp_code=0,actions=drop
add cookie=0x36a169c56b77279e,table=0,in_port=7,dl_src=02:aa:bb:cc:dd:ee,priority=20,actions=NORMAL
add cookie=0x36a169c56b77279e,table=0,in_port=7,priority=10,actions=drop
`
	if got := Ofctl("fsk0123456789ab", 7, rules); got != want {
		t.Errorf("ovs-ofctl input:\n%s\nwant:\n%s", got, want)
	}
	if _, err := Rules("p", "nonsense"); err == nil {
		t.Error("a malformed MAC gave rules")
	}
	if _, err := Rules("p", "02:00:00:00:00:00:00:01"); err == nil {
		t.Error("an EUI-64 gave rules")
	}
}

// The flow mods are the same list: two deletes (cookie, ofport) and one add per rule under the
// port's cookie, each matching the ofport first and every prerequisite before the field that
// needs it, NORMAL exactly for the pass rules. (The node test compares what OVS then holds
// with what ovs-ofctl made.)
func TestFlowModsFollowTheRules(t *testing.T) {
	rules, err := Rules("fsk0123456789ab", "02:aa:bb:cc:dd:ee")
	if err != nil {
		t.Fatal(err)
	}
	mods := FlowMods("fsk0123456789ab", 7, rules)
	if len(mods) != len(rules)+2 {
		t.Fatalf("%d flow mods for %d rules", len(mods), len(rules))
	}
	cookie := Cookie("fsk0123456789ab")
	if d := mods[0]; d.Command != openflow.FlowDelete || d.Cookie != cookie || d.CookieMask != ^uint64(0) || len(d.Match) != 0 || d.Table != openflow.TableAll {
		t.Errorf("first mod %+v, want a delete of every rule with the cookie", d)
	}
	if d := mods[1]; d.Command != openflow.FlowDelete || d.CookieMask != 0 || len(d.Match) != 1 || d.Match[0].Field != openflow.FieldInPort || binary.BigEndian.Uint32(d.Match[0].Value) != 7 {
		t.Errorf("second mod %+v, want a delete of every rule on ofport 7", d)
	}
	needs := map[uint8]uint8{openflow.FieldARPSHA: openflow.FieldEthType, openflow.FieldIPProto: openflow.FieldEthType,
		openflow.FieldICMPv6Type: openflow.FieldIPProto, openflow.FieldICMPv6Code: openflow.FieldIPProto,
		openflow.FieldNDSLL: openflow.FieldICMPv6Type, openflow.FieldNDTLL: openflow.FieldICMPv6Type}
	for i, m := range mods[2:] {
		r := rules[i]
		if m.Command != openflow.FlowAdd || m.Cookie != cookie || m.Table != 0 || m.Priority != r.Priority || m.Normal != r.Pass {
			t.Errorf("mod %d %+v does not add rule %+v", i, m, r)
		}
		if m.Match[0].Field != openflow.FieldInPort {
			t.Errorf("mod %d does not match the ofport first", i)
		}
		seen := map[uint8]bool{}
		for _, f := range m.Match {
			if p, ok := needs[f.Field]; ok && !seen[p] {
				t.Errorf("mod %d: field %d before its prerequisite %d", i, f.Field, p)
			}
			seen[f.Field] = true
			if f.Field == openflow.FieldEthSrc && net.HardwareAddr(f.Value).String() != "02:aa:bb:cc:dd:ee" {
				t.Errorf("mod %d passes source %s", i, net.HardwareAddr(f.Value))
			}
		}
		if r.Pass != seen[openflow.FieldEthSrc] {
			t.Errorf("mod %d: only frames from the port's MAC may pass", i)
		}
	}
}

func TestCookie(t *testing.T) {
	a, b := Cookie("fsk0123456789ab"), Cookie("fsk0123456789ac")
	if a == b || a != Cookie("fsk0123456789ab") || a>>63 != 0 || b>>63 != 0 {
		t.Errorf("cookies %#x %#x: want distinct per port, stable, top bit clear", a, b)
	}
}
