package render

import (
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// ProfileValue is one config.ini value a tuning profile sets, where F-Stack documents it, and
// what became of it in this spec.
type ProfileValue struct {
	Profile      fsv1.Profile
	Section, Key string
	Value        string
	// Source names the F-Stack document (and its section) the value comes from.
	Source string
	// OverriddenBy is the explicit field whose value config.ini holds instead; empty when the
	// profile's value stands.
	OverriddenBy string
	// Unused says why the profile's value does not apply to this spec; empty when it does.
	Unused string
}

// profileSetting is one default of a profile. Settings of [dpdk] and [rss_check] change the spec
// before the other defaults (apply); FreeBSD ones are a layer between F-Stack's shipped values and
// the spec's own (freebsdSections), so the typed fields and the free-form maps both override them.
type profileSetting struct {
	section, key, value, source string
	// explicit is the field of the spec that overrides the setting, or nil when the spec leaves
	// it to the profile.
	explicit func(s *fsv1.StackInstanceSpec) *field.Path
	// unused says why the setting cannot apply to s ("" when it can).
	unused func(s *fsv1.StackInstanceSpec) string
	// apply sets the spec field; nil for FreeBSD tunables.
	apply func(s *fsv1.StackInstanceSpec)
}

// Sources, as docs/profiles.md §1 names them (files of F-Stack's v1.25 source tree).
const (
	srcSyscallLong  = `F-Stack adapter/syscall/README.md, the pkt_tx_delay tip and "Nginx Long Connection"`
	srcSyscallShort = `F-Stack adapter/syscall/README.md, the pkt_tx_delay tip and "Nginx Short Connection"`
	srcRSSCheck     = "F-Stack config.ini, the comment on [rss_check]"
	srcRandomTime   = "F-Stack config.ini, the comment on net.inet.ip.portrange.randomtime"
)

var pktTxDelayPath = field.NewPath("spec", "dpdk", "pktTxDelayMicroseconds")

func pktTxDelay(us int32, source string) profileSetting {
	return profileSetting{
		section: "dpdk", key: "pkt_tx_delay", value: strconv.Itoa(int(us)), source: source,
		explicit: func(s *fsv1.StackInstanceSpec) *field.Path {
			if s.DPDK.PktTxDelayMicroseconds != nil {
				return pktTxDelayPath
			}
			return nil
		},
		apply: func(s *fsv1.StackInstanceSpec) { s.DPDK.PktTxDelayMicroseconds = new(us) },
	}
}

var rssEnabledPath = field.NewPath("spec", "rssCheck", "enabled")

// rssCheckOn turns the table on for the upstreams the spec lists: a profile cannot know them.
var rssCheckOn = profileSetting{
	section: "rss_check", key: "enable", value: "1", source: srcRSSCheck,
	explicit: func(s *fsv1.StackInstanceSpec) *field.Path {
		if s.RSSCheck != nil && s.RSSCheck.Enabled != nil {
			return rssEnabledPath
		}
		return nil
	},
	unused: func(s *fsv1.StackInstanceSpec) string {
		if s.RSSCheck == nil || len(s.RSSCheck.Entries) == 0 {
			return "spec.rssCheck.entries lists no upstreams: list each (local address, upstream address, port) to have the table built"
		}
		return ""
	},
	apply: func(s *fsv1.StackInstanceSpec) { s.RSSCheck.Enabled = new(true) },
}

// profiles holds only values an F-Stack document states; docs/profiles.md §2 lists what the
// documents leave without a number (TIME_WAIT, port ranges, buffers), which stay F-Stack's.
var profiles = map[fsv1.Profile][]profileSetting{
	fsv1.ProfileLongConnections:  {pktTxDelay(100, srcSyscallLong)},
	fsv1.ProfileShortConnections: {pktTxDelay(50, srcSyscallShort)},
	fsv1.ProfileProxy: {
		rssCheckOn,
		freebsdSetting("freebsd.sysctl", "net.inet.ip.portrange.randomtime", "0", srcRandomTime),
	},
}

// freebsdSetting is a profile's FreeBSD tunable; the spec overrides it with a typed field or an
// entry of spec.freebsd.boot or spec.freebsd.sysctl.
func freebsdSetting(section, key, value, source string) profileSetting {
	return profileSetting{
		section: section, key: key, value: value, source: source,
		explicit: func(s *fsv1.StackInstanceSpec) *field.Path { return explicitFreeBSD(&s.FreeBSD)[key] },
	}
}

// explicitFreeBSD maps each FreeBSD tunable the spec sets itself to the field that sets it.
func explicitFreeBSD(fb *fsv1.FreeBSDSpec) map[string]*field.Path {
	path := field.NewPath("spec", "freebsd")
	boot, sysctl := typedFreeBSD(fb, path)
	out := map[string]*field.Path{}
	for _, e := range append(boot, sysctl...) {
		out[e.key] = e.path
	}
	for k := range fb.Boot {
		out[k] = path.Child("boot").Key(k)
	}
	for k := range fb.Sysctl {
		out[k] = path.Child("sysctl").Key(k)
	}
	return out
}

// ProfileValues lists what the spec's profile sets and what became of each value; nil without a
// profile. The CLI shows it next to config.ini; it never changes config.ini itself.
func ProfileValues(spec *fsv1.StackInstanceSpec) []ProfileValue {
	var out []ProfileValue
	for _, ps := range profiles[spec.Profile] {
		v := ProfileValue{Profile: spec.Profile, Section: ps.section, Key: ps.key, Value: ps.value, Source: ps.source}
		// A value the spec sets itself is the user's choice, whether or not the profile's applies.
		if p := ps.explicit(spec); p != nil {
			v.OverriddenBy = p.String()
		} else if ps.unused != nil {
			v.Unused = ps.unused(spec)
		}
		out = append(out, v)
	}
	return out
}

// applyProfile sets the spec fields the profile defaults and the spec leaves unset.
func applyProfile(s *fsv1.StackInstanceSpec) {
	for _, ps := range profiles[s.Profile] {
		if ps.apply == nil || ps.explicit(s) != nil || (ps.unused != nil && ps.unused(s) != "") {
			continue
		}
		ps.apply(s)
	}
}

// profileFreeBSD is the profile's layer of FreeBSD tunables, in the profile's order.
func profileFreeBSD(s *fsv1.StackInstanceSpec) (boot, sysctl []kv) {
	path := field.NewPath("spec", "profile")
	for _, ps := range profiles[s.Profile] {
		e := kv{key: ps.key, value: ps.value, path: path}
		switch ps.section {
		case "freebsd.boot":
			boot = append(boot, e)
		case "freebsd.sysctl":
			sysctl = append(sysctl, e)
		}
	}
	return boot, sysctl
}
