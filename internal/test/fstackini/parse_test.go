package fstackini

import (
	"reflect"
	"strings"
	"testing"
)

const minimal = `[dpdk]
lcore_mask=c
port_list=0
nb_vdev=0
nb_bond=0

[port0]
addr=10.0.0.2
netmask=255.255.255.0
broadcast=10.0.0.255
gateway=10.0.0.1
`

func TestMinimalAccepted(t *testing.T) {
	c, err := Parse([]byte(minimal), V125)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Lcores, []int{2, 3}) {
		t.Errorf("lcore_mask=c is lcores 2,3, got %v", c.Lcores)
	}
	if !reflect.DeepEqual(c.Ports[0].LcoreList, []int{2, 3}) {
		t.Errorf("a port's lcore_list defaults to every lcore, got %v", c.Ports[0].LcoreList)
	}
}

// Each case is a fact of F-Stack's parser (docs/fstack-rules.md §1) the reader must reproduce.
func TestParserFacts(t *testing.T) {
	cases := []struct {
		name, input, wantErr string
		check                func(*Config) bool
	}{
		{"inline ; after a blank is a comment", strings.Replace(minimal, "addr=10.0.0.2", "addr=10.0.0.2 ;10.0.0.3", 1), "",
			func(c *Config) bool { return c.Ports[0].Keys["addr"] == "10.0.0.2" }},
		{"inline # is part of the value", strings.Replace(minimal, "gateway=10.0.0.1", "gateway=10.0.0.1 # gw", 1), "",
			func(c *Config) bool { return c.Ports[0].Keys["gateway"] == "10.0.0.1 # gw" }},
		{"colon separator", strings.Replace(minimal, "netmask=", "netmask: ", 1), "",
			func(c *Config) bool { return c.Ports[0].Keys["netmask"] == "255.255.255.0" }},
		{"indented line continues the previous key", strings.Replace(minimal, "gateway=", "  gateway=", 1), "continues key", nil},
		{"line over 2047 characters", minimal + "[freebsd.sysctl]\nx=" + strings.Repeat("1", 2046) + "\n", "2047", nil},
		{"port key before port_list", strings.Replace(minimal, "port_list=0\n", "", 1) + "[dpdk]\nport_list=0\n", "port_list first", nil},
		{"missing gateway", strings.Replace(minimal, "gateway=10.0.0.1\n", "", 1), "no gateway", nil},
		{"lcore_list outside lcore_mask", minimal + "lcore_list=2-4\n", "not enabled", nil},
		{"lcore with nothing to do", minimal + "lcore_list=2\n", "nothing to do", nil},
		{"non-integer list token", strings.Replace(minimal, "port_list=0", "port_list=zero", 1), "not an integer", nil},
		{"section [portal] is a parse error", minimal + "[portal]\nx=1\n", "not a number", nil},
		{"rss_check before any port", "[dpdk]\nlcore_mask=1\nport_list=0\n[rss_check]\nenable=1\n", "port or dpdk.vlan first", nil},
		{"rss entry with 3 fields drops the table", minimal + "[rss_check]\nenable=1\nrss_tbl=0 1.1.1.1 2.2.2.2\n", "not 4", nil},
		{"repeated key", minimal + "addr=10.0.0.3\n", "repeated", nil},
		{"pci_whitelist is not a v1.25 key", strings.Replace(minimal, "nb_bond=0", "nb_bond=0\npci_whitelist=01:00.0", 1), "not a [dpdk] key", nil},
		{"kni without method", minimal + "[kni]\nenable=1\n", "method", nil},
		{"vdev beyond nb_vdev", minimal + "[vdev0]\npath=/x\n", "nb_vdev", nil},
		{"vlan before its port", "[dpdk]\nlcore_mask=1\nport_list=0\nvlan_filter=10\n[vlan10]\nportid=0\n", "before any [portN]", nil},
		{"list number past uint16 (F-Stack truncates it; a huge range must not be expanded)",
			strings.Replace(minimal, "port_list=0", "port_list=0-2000000000", 1), "16-bit", nil},
		{"nb_vdev past RTE_MAX_ETHPORTS (the checks would walk every section index)",
			strings.Replace(minimal, "nb_vdev=0", "nb_vdev=1000000000000", 1), "outside 0..32", nil},
		{"negative nb_bond", strings.Replace(minimal, "nb_bond=0", "nb_bond=-1", 1), "outside 0..32", nil},
		{"list of more than 4096 elements", strings.Replace(minimal, "port_list=0", "port_list=0-4096", 1), "too many elements", nil},
		{"list of more than 128 items", strings.Replace(minimal, "port_list=0", "port_list=0"+strings.Repeat(",0", 128), 1), "first 128", nil},
		{"ranges in lists", strings.Replace(minimal, "lcore_mask=c", "lcore_mask=3c", 1) + "lcore_list=2-3,4-5\n", "",
			func(c *Config) bool { return reflect.DeepEqual(c.Ports[0].LcoreList, []int{2, 3, 4, 5}) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.input), V125)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("parsed to %+v", c.Ports[0])
			}
		})
	}
}

func TestEALFromConfig(t *testing.T) {
	in := strings.Replace(minimal, "nb_vdev=0", "nb_vdev=1", 1) + "[vdev0]\npath=/run/v.sock\nqueues=2\nmac=02:00:00:00:00:01\n"
	c, err := Parse([]byte(in), V125)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"f-stack", "-c8", "--proc-type=secondary", "--vdev=virtio_user0,path=/run/v.sock,queues=2,mac=02:00:00:00:00:01", "--no-pci", "--file-prefix=container"}
	if got := c.EAL(1, false); !reflect.DeepEqual(got, want) {
		t.Errorf("upstream EAL:\n got %q\nwant %q", got, want)
	}
	if got := c.EAL(1, true); got[len(got)-1] != "--single-file-segments" || strings.Contains(strings.Join(got, " "), "container") {
		t.Errorf("patched EAL keeps prefix rte and adds --single-file-segments, got %q", got)
	}
}

// Patch 0003 reads KUBE_FSTACK_LCORE_CPUS as its C does (each case was run through the patched
// dpdk_args_setup compiled on its own): entry proc of a list of digits and commas, 1-4 digits,
// else -c with a warning; the upstream build ignores it.
func TestEALWithLcoreCPUs(t *testing.T) {
	c, err := Parse([]byte(minimal), V125)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		value string
		set   bool
		want  string // argv[1] of process 1 (lcore 3)
	}{
		{"", false, "-c8"},
		{"1,1", true, "--lcores=3@1"},
		{"3,7", true, "--lcores=3@7"},
		{"12345,1", true, "--lcores=3@1"},
		{"1", true, "-c8"},
		{"1,x", true, "-c8"},
		{"1,", true, "-c8"},
		{",", true, "-c8"},
		{"", true, "-c8"},
		{"0,12345", true, "-c8"},
	}
	for _, tc := range cases {
		if got := c.EALWithEnv(1, true, tc.value, tc.set); got[1] != tc.want {
			t.Errorf("KUBE_FSTACK_LCORE_CPUS=%q (set %v): argv[1] %q, want %q", tc.value, tc.set, got[1], tc.want)
		}
		if got := c.EALWithEnv(1, false, tc.value, tc.set); got[1] != "-c8" {
			t.Errorf("unpatched with %q: argv[1] %q, want -c8", tc.value, got[1])
		}
	}
}
