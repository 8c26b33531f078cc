package render_test

import (
	"bytes"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fstackini"
)

// proxyBase is base() with the upstreams of a proxy listed and rssCheck.enabled left unset.
func proxyBase() (*fsv1.StackInstanceSpec, *render.Facts) {
	s, f := base()
	s.RSSCheck = &fsv1.RSSCheckSpec{Entries: []fsv1.RSSCheckEntry{
		{Port: "data", LocalAddress: "10.0.0.10", RemoteAddress: "10.9.0.1", RemotePort: 80},
	}}
	return s, f
}

// renderINI renders s and reads the result back with F-Stack's rules (package fstackini).
func renderINI(t *testing.T, s *fsv1.StackInstanceSpec, f *render.Facts) (*render.Result, *fstackini.Config) {
	t.Helper()
	res, err := render.RenderRaw(s, f)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	c, err := fstackini.Parse(res.Config, fstackini.V125)
	if err != nil {
		t.Fatalf("F-Stack would not accept the config: %v\n%s", err, res.Config)
	}
	return res, c
}

func sysctl(c *fstackini.Config, key string) string {
	for _, e := range c.Sysctl {
		if e.Key == key {
			return e.Value
		}
	}
	return ""
}

// TestProfileSetsItsValues: each profile's documented values reach config.ini, and ProfileValues
// reports them as the profile's (docs/profiles.md §1).
func TestProfileSetsItsValues(t *testing.T) {
	cases := []struct {
		profile    fsv1.Profile
		spec       func() (*fsv1.StackInstanceSpec, *render.Facts)
		pktTxDelay string
		rssEnable  bool
		keys       []string // section/key the profile reports as its own
	}{
		{fsv1.ProfileLongConnections, base, "100", false, []string{"dpdk/pkt_tx_delay"}},
		{fsv1.ProfileShortConnections, base, "50", false, []string{"dpdk/pkt_tx_delay"}},
		{fsv1.ProfileProxy, proxyBase, "100", true, []string{"rss_check/enable", "freebsd.sysctl/net.inet.ip.portrange.randomtime"}},
	}
	for _, tc := range cases {
		t.Run(string(tc.profile), func(t *testing.T) {
			s, f := tc.spec()
			s.Profile = tc.profile
			res, c := renderINI(t, s, f)
			if got := c.DPDK["pkt_tx_delay"]; got != tc.pktTxDelay {
				t.Errorf("pkt_tx_delay = %s, want %s", got, tc.pktTxDelay)
			}
			if c.RSSEnable != tc.rssEnable {
				t.Errorf("[rss_check] enable = %v, want %v", c.RSSEnable, tc.rssEnable)
			}
			if got := sysctl(c, "net.inet.ip.portrange.randomtime"); got != "0" {
				t.Errorf("net.inet.ip.portrange.randomtime = %q, want 0", got)
			}
			var got []string
			for _, v := range res.Profile {
				if v.Profile != tc.profile || v.Source == "" || v.OverriddenBy != "" || v.Unused != "" {
					t.Errorf("profile value %+v: want the profile's, with its source, in force", v)
				}
				got = append(got, v.Section+"/"+v.Key)
			}
			if !equalStrings(got, tc.keys) {
				t.Errorf("profile values %v, want %v", got, tc.keys)
			}
		})
	}
}

// TestProfileYieldsToExplicitFields: every value a profile sets loses to the field that sets it,
// and ProfileValues names that field.
func TestProfileYieldsToExplicitFields(t *testing.T) {
	cases := []struct {
		name    string
		spec    func() (*fsv1.StackInstanceSpec, *render.Facts)
		profile fsv1.Profile
		set     func(*fsv1.StackInstanceSpec)
		check   func(*fstackini.Config) bool
		field   string
	}{
		{"pktTxDelay over ShortConnections", base, fsv1.ProfileShortConnections,
			func(s *fsv1.StackInstanceSpec) { s.DPDK.PktTxDelayMicroseconds = new(int32(80)) },
			func(c *fstackini.Config) bool { return c.DPDK["pkt_tx_delay"] == "80" }, "spec.dpdk.pktTxDelayMicroseconds"},
		{"pktTxDelay 100 over ShortConnections", base, fsv1.ProfileShortConnections,
			func(s *fsv1.StackInstanceSpec) { s.DPDK.PktTxDelayMicroseconds = new(int32(100)) },
			func(c *fstackini.Config) bool { return c.DPDK["pkt_tx_delay"] == "100" }, "spec.dpdk.pktTxDelayMicroseconds"},
		{"rssCheck.enabled false over Proxy", proxyBase, fsv1.ProfileProxy,
			func(s *fsv1.StackInstanceSpec) { s.RSSCheck.Enabled = new(false) },
			func(c *fstackini.Config) bool { return !c.RSSEnable }, "spec.rssCheck.enabled"},
		{"typed portRangeRandomTime over Proxy", proxyBase, fsv1.ProfileProxy,
			func(s *fsv1.StackInstanceSpec) { s.FreeBSD.PortRangeRandomTime = new(int32(45)) },
			func(c *fstackini.Config) bool { return sysctl(c, "net.inet.ip.portrange.randomtime") == "45" },
			"spec.freebsd.portRangeRandomTime"},
		{"sysctl entry over Proxy", proxyBase, fsv1.ProfileProxy,
			func(s *fsv1.StackInstanceSpec) {
				s.FreeBSD.Sysctl = map[string]string{"net.inet.ip.portrange.randomtime": "7"}
			},
			func(c *fstackini.Config) bool { return sysctl(c, "net.inet.ip.portrange.randomtime") == "7" },
			"spec.freebsd.sysctl[net.inet.ip.portrange.randomtime]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, f := tc.spec()
			s.Profile = tc.profile
			tc.set(s)
			res, c := renderINI(t, s, f)
			if !tc.check(c) {
				t.Errorf("the explicit value did not win:\n%s", res.Config)
			}
			found := false
			for _, v := range res.Profile {
				if v.OverriddenBy == tc.field {
					found = true
				}
			}
			if !found {
				t.Errorf("no profile value says %s overrides it: %+v", tc.field, res.Profile)
			}
		})
	}
}

// TestProfileWithoutUpstreams: Proxy cannot invent the upstreams of the [rss_check] table, so
// without entries it leaves the table as it is and says why.
func TestProfileWithoutUpstreams(t *testing.T) {
	s, f := base()
	s.Profile = fsv1.ProfileProxy
	res, c := renderINI(t, s, f)
	if c.RSSEnable {
		t.Errorf("[rss_check] enabled without entries:\n%s", res.Config)
	}
	for _, v := range res.Profile {
		if v.Key == "enable" && v.Unused == "" {
			t.Errorf("the table's default is reported in force without entries: %+v", v)
		}
	}
}

// TestNoProfileKeepsFStackDefaults: without a profile nothing is reported and LongConnections,
// whose documented values are F-Stack's own, renders the very same bytes as no profile.
func TestNoProfileKeepsFStackDefaults(t *testing.T) {
	s, f := proxyBase()
	s.RSSCheck.Enabled = new(true)
	defaulted, plain, err := render.RenderDefaulted(s, f)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Profile != nil {
		t.Errorf("no profile, yet profile values %+v", plain.Profile)
	}
	if got := *defaulted.DPDK.PktTxDelayMicroseconds; got != 100 {
		t.Errorf("pkt_tx_delay default %d, want F-Stack's 100", got)
	}
	s.Profile = fsv1.ProfileLongConnections
	long, err := render.RenderRaw(s, f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain.Config, long.Config) {
		t.Errorf("LongConnections changed config.ini:\n%s\nvs\n%s", plain.Config, long.Config)
	}
}

// TestUnknownProfileRefused: the renderer, like the CRD's enum, refuses a profile it does not
// know at spec.profile (a pod's spec annotation or a CLI file never passed the API server).
func TestUnknownProfileRefused(t *testing.T) {
	s, _ := base()
	s.Profile = "Fast"
	if errs := render.Validate(s); !errorAt(errs, "spec.profile") {
		t.Fatalf("want an error at spec.profile, got %v", errs.ToAggregate())
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
