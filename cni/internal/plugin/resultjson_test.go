package plugin

import (
	"encoding/json"
	"net"
	"reflect"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// encodeResult writes what the library's Result marshalling writes, member for member.
func TestEncodeResultMatchesTheLibrary(t *testing.T) {
	_, v4, _ := net.ParseCIDR("10.9.0.5/24")
	v4.IP = net.ParseIP("10.9.0.5").To4()
	_, v6, _ := net.ParseCIDR("fd00::5/64")
	v6.IP = net.ParseIP("fd00::5")
	_, dst, _ := net.ParseCIDR("0.0.0.0/0")
	table, scope := 100, 0
	full := &current.Result{
		Interfaces: []*current.Interface{{Name: "eth0", Mac: "02:00:00:00:00:01", Sandbox: "/run/netns/p"},
			{Name: "net1", Mac: "02:00:00:00:00:02", Mtu: 9000, Sandbox: "/run/netns/p", SocketPath: "/run/x/net1.sock", PciID: "0000:00:01.0"}},
		IPs: []*current.IPConfig{{Interface: current.Int(1), Address: *v4, Gateway: net.ParseIP("10.9.0.1")},
			{Interface: current.Int(0), Address: *v6}, {Address: *v4}},
		Routes: []*types.Route{{Dst: *dst, GW: net.ParseIP("10.9.0.1"), MTU: 1400, AdvMSS: 1300, Priority: 5, Table: &table, Scope: &scope},
			{Dst: *v6}},
		DNS: types.DNS{Nameservers: []string{"10.9.0.1"}, Domain: "cluster.local", Search: []string{"a", "b"}, Options: []string{"ndots:5"}},
	}
	for name, res := range map[string]*current.Result{
		"interface only": {Interfaces: []*current.Interface{{Name: "net1", SocketPath: "/run/x/net1.sock", Mtu: 1500}}},
		"everything":     full,
		"empty":          {},
		"dns domain":     {DNS: types.DNS{Domain: "d"}},
	} {
		for _, version := range []string{"1.0.0", "1.1.0"} {
			conv, err := res.GetAsVersion(version)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(conv)
			if err != nil {
				t.Fatal(err)
			}
			got := encodeResult(res, version)
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("%s: invalid JSON %s: %v", name, got, err)
			}
			_ = json.Unmarshal(want, &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s %s:\n got %s\nwant %s", name, version, got, want)
			}
		}
	}
}
