package render

import (
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// TestProfileFreeBSDLayer: a profile's FreeBSD tunable (a stand-in value unlike F-Stack's
// shipped one, since no real profile documents such a number yet) replaces the shipped value,
// and a typed field or a boot/sysctl entry of the spec replaces the profile's, without being
// taken for a second setting of the key.
func TestProfileFreeBSDLayer(t *testing.T) {
	const test fsv1.Profile = "Test"
	profiles[test] = []profileSetting{
		freebsdSetting("freebsd.sysctl", "net.inet.tcp.maxtcptw", "4096", "test"),
		freebsdSetting("freebsd.boot", "kern.ncallout", "524288", "test"),
	}
	defer delete(profiles, test)
	cases := []struct {
		name               string
		set                func(*fsv1.FreeBSDSpec)
		maxtcptw, ncallout string
	}{
		{"profile over shipped", func(*fsv1.FreeBSDSpec) {}, "4096", "524288"},
		{"typed field over profile", func(fb *fsv1.FreeBSDSpec) { fb.MaxTCPTimeWait = new(int32(64)) }, "64", "524288"},
		{"entries over profile", func(fb *fsv1.FreeBSDSpec) {
			fb.Sysctl = map[string]string{"net.inet.tcp.maxtcptw": "32"}
			fb.Boot = map[string]string{"kern.ncallout": "131072"}
		}, "32", "131072"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &fsv1.StackInstanceSpec{Profile: test}
			tc.set(&s.FreeBSD)
			d, _ := schemaDefaults(s)
			s = layerDefaults(d)
			boot, sysctl, errs := freebsdSections(s)
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs.ToAggregate())
			}
			if e, _ := findKV(sysctl, "net.inet.tcp.maxtcptw"); e.value != tc.maxtcptw {
				t.Errorf("maxtcptw = %q, want %s", e.value, tc.maxtcptw)
			}
			if e, _ := findKV(boot, "kern.ncallout"); e.value != tc.ncallout {
				t.Errorf("kern.ncallout = %q, want %s", e.value, tc.ncallout)
			}
			if len(sysctl) != len(shippedSysctl) || len(boot) != len(shippedBoot)+1 { // +1: kern.maxfiles for kernelEvent
				t.Errorf("the profile added keys instead of replacing shipped ones: %d boot, %d sysctl", len(boot), len(sysctl))
			}
		})
	}
}
