package plugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// What Multus sends for a networks entry with ips and mac when the network declares the
// capabilities: the port's static addresses and MAC. ADD takes no lease, and the result and the
// device info carry exactly those, so the pod's network-status shows what the dataplane serves.
func TestAddWithStaticIPsTakesNoLease(t *testing.T) {
	f := newFakeOVSDB(t, nil)
	n := newNode(t, f.path, map[string]any{"runtimeConfig": map[string]any{
		"ips": []string{"10.99.0.10/24", "2001:db8::10/64"}, "mac": "02:fe:00:00:00:01"}})
	res, a, err := n.add()
	if err != nil {
		t.Fatal(err)
	}
	n.assertIPAM(0, 0)
	if len(res.Interfaces) != 1 || res.Interfaces[0].Mac != "02:fe:00:00:00:01" {
		t.Errorf("result interfaces %+v, want the runtime's MAC", res.Interfaces)
	}
	var got []string
	for _, ip := range res.IPs {
		got = append(got, ip.Address.String())
		if ip.Interface == nil || *ip.Interface != 0 {
			t.Errorf("IP %s not on the port's interface", ip.Address.String())
		}
	}
	if strings.Join(got, " ") != "10.99.0.10/24 2001:db8::10/64" {
		t.Errorf("result IPs %v, want the static addresses", got)
	}
	for _, p := range []string{a.devInfoInPodDir(), a.DevInfoFile} {
		info, err := podcontract.ReadDevInfo(p)
		if err != nil || strings.Join(info.IPs, " ") != "10.99.0.10/24 2001:db8::10/64" || info.MAC != "02:fe:00:00:00:01" {
			t.Errorf("%s: %+v %v", p, info, err)
		}
	}
	guarded, _ := n.flows.state()
	if guarded[a.PortName] != "02:fe:00:00:00:01" {
		t.Errorf("anti-spoofing rules for MAC %q, want the runtime's", guarded[a.PortName])
	}
}

func TestStaticIPsValidated(t *testing.T) {
	for _, ips := range [][]string{{"10.99.0.10"}, {"not-an-ip/24"}, {"10.99.0.10/33"}} {
		_, err := parseConf(confJSON(t, map[string]any{"runtimeConfig": map[string]any{"ips": ips}}))
		var te *types.Error
		if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(te.Msg, "runtimeConfig.ips") {
			t.Errorf("ips %v: want code 7 naming runtimeConfig.ips, got %v", ips, err)
		}
	}
	many := make([]string, maxStaticIPs+1)
	for i := range many {
		many[i] = "10.0.0.1/24"
	}
	if _, err := parseConf(confJSON(t, map[string]any{"runtimeConfig": map[string]any{"ips": many}})); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d ips accepted: %v", len(many), err)
	}
}
