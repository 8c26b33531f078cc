package podcontract

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestAddressesRoundTrip(t *testing.T) {
	in := []ServedAddress{
		{Port: 0, Addr: netip.MustParseAddr("10.56.0.11")},
		{Port: 0, Addr: netip.MustParseAddr("2001:db8::11")},
		{Port: 1, Addr: netip.MustParseAddr("10.57.0.11")},
		{Port: MaxPorts - 1, Addr: netip.MustParseAddr("10.58.0.11")}, // the CRD's last port
	}
	v := FormatAddresses(in)
	if v != "0=10.56.0.11,0=2001:db8::11,1=10.57.0.11,15=10.58.0.11" {
		t.Fatalf("FormatAddresses = %q", v)
	}
	out, err := ParseAddresses(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("ParseAddresses = %v, want %v", out, in)
	}
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("entry %d = %v, want %v", i, out[i], in[i])
		}
	}
	if out, err := ParseAddresses(""); err != nil || out != nil {
		t.Errorf("ParseAddresses(\"\") = %v, %v; want nothing", out, err)
	}
}

func TestParseAddressesRefusesWhatAPodMightWrite(t *testing.T) {
	for _, v := range []string{
		"10.56.0.11",
		"0=10.56.0.11,x",
		"-1=10.56.0.11",
		strconv.Itoa(MaxPorts) + "=10.56.0.11", // past the CRD's last port
		"64=10.56.0.11",
		"01=10.56.0.11",
		"0=10.56.0.0/24",
		"0=fe80::1%eth0",
		"0=127.0.0.1",
		"0=224.0.0.1",
		"0=0.0.0.0",
		"0=255.255.255.255",
		"0=10.56.0.11\n",
		strings.Repeat("0=10.56.0.11,", 2*MaxPorts) + "0=10.56.0.12",
	} {
		if out, err := ParseAddresses(v); err == nil {
			t.Errorf("ParseAddresses(%q) = %v, want an error", v, out)
		}
	}
}

// An entry names its port; one an older operator wrote does not, and is still read.
func TestAddressesNameTheirPort(t *testing.T) {
	in := []ServedAddress{{Port: 0, PortName: "data", Addr: netip.MustParseAddr("10.56.0.11")}, {Port: 1, PortName: "mgmt", Addr: netip.MustParseAddr("2001:db8::11")}}
	v := FormatAddresses(in)
	if v != "0:data=10.56.0.11,1:mgmt=2001:db8::11" {
		t.Fatalf("FormatAddresses = %q", v)
	}
	out, err := ParseAddresses(v + ",2=10.57.0.11")
	if err != nil || len(out) != 3 || out[0] != in[0] || out[1] != in[1] || out[2].PortName != "" || out[2].Port != 2 {
		t.Fatalf("ParseAddresses = %+v, %v", out, err)
	}
	for _, bad := range []string{"0:=10.56.0.11", "0:Data=10.56.0.11", "0:-a=10.56.0.11", "0:" + strings.Repeat("a", MaxPortName+1) + "=10.56.0.11",
		"0:a:b=10.56.0.11", strings.Repeat("0=10.56.0.11,", MaxAddressesBytes/12) + "0=10.56.0.11"} {
		if _, err := ParseAddresses(bad); err == nil {
			t.Errorf("ParseAddresses(%.40q) was read", bad)
		}
	}
}
