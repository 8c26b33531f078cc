package render

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// The [rss_check] table is a 16 x 4 hash layout: entries that do not fit are dropped with only a
// warning (FF_RSS_TBL_* in ff_config.h).
// MaxRSSEntries (bounds.go) is the whole table.
const (
	maxRSSRemotePairs = 16
	maxRSSLocalAddrs  = 4
)

// checkRSS checks what needs no facts: limits, duplicates, address syntax.
func checkRSS(s *fsv1.StackInstanceSpec) field.ErrorList {
	r := s.RSSCheck
	if r == nil {
		return nil
	}
	path := field.NewPath("spec", "rssCheck", "entries")
	var errs field.ErrorList
	if len(r.Entries) > MaxRSSEntries {
		errs = append(errs, field.TooMany(path, len(r.Entries), MaxRSSEntries))
	}
	locals := map[string]map[string]bool{} // remote addr:port -> local addrs
	seen := map[string]bool{}
	for i, e := range r.Entries {
		p := path.Index(i)
		if !isIPv4(e.LocalAddress) {
			errs = append(errs, field.Invalid(p.Child("localAddress"), e.LocalAddress, "must be an IPv4 address (the table is IPv4 only)"))
		}
		if !isIPv4(e.RemoteAddress) {
			errs = append(errs, field.Invalid(p.Child("remoteAddress"), e.RemoteAddress, "must be an IPv4 address (the table is IPv4 only)"))
		}
		if e.RemotePort < 1 || e.RemotePort > MaxPort {
			errs = append(errs, field.Invalid(p.Child("remotePort"), e.RemotePort, fmt.Sprintf("must be 1-%d", MaxPort)))
		}
		key := fmt.Sprintf("%s %s %s %d", e.Port, e.LocalAddress, e.RemoteAddress, e.RemotePort)
		if seen[key] {
			errs = append(errs, field.Duplicate(p, key))
			continue
		}
		seen[key] = true
		pair := fmt.Sprintf("%s:%d", e.RemoteAddress, e.RemotePort)
		if locals[pair] == nil {
			if len(locals) == maxRSSRemotePairs {
				errs = append(errs, field.Invalid(p, pair, fmt.Sprintf(
					"the table holds at most %d distinct remote address:port pairs; F-Stack would silently drop this entry",
					maxRSSRemotePairs)))
				continue
			}
			locals[pair] = map[string]bool{}
		}
		locals[pair][e.LocalAddress] = true
		if len(locals[pair]) > maxRSSLocalAddrs {
			errs = append(errs, field.Invalid(p.Child("localAddress"), e.LocalAddress, fmt.Sprintf(
				"the table holds at most %d local addresses per remote %s; F-Stack would silently drop this entry",
				maxRSSLocalAddrs, pair)))
		}
	}
	return errs
}

// rssTable renders rss_tbl, checking that each local address belongs to the entry's port where
// the port's addresses are known.
func (p *plan) rssTable() (string, field.ErrorList) {
	r := p.spec.RSSCheck
	byName := map[string]*portPlan{}
	for i := range p.ports {
		byName[p.ports[i].spec.Name] = &p.ports[i]
	}
	var errs field.ErrorList
	parts := make([]string, 0, len(r.Entries))
	for i, e := range r.Entries {
		path := field.NewPath("spec", "rssCheck", "entries").Index(i)
		pp := byName[e.Port] // an entry names a port: the CRD's rule, which Prepare holds the spec to
		if known, owned := p.ownsAddress(pp, e.LocalAddress); known && !owned {
			errs = append(errs, field.Invalid(path.Child("localAddress"), e.LocalAddress, fmt.Sprintf(
				"is not an address of port %s (its address, a VIP, or one of its VLANs): connections from "+
					"it never leave by that port", e.Port)))
		}
		parts = append(parts, fmt.Sprintf("%d %s %s %d", pp.id, e.LocalAddress, e.RemoteAddress, e.RemotePort))
	}
	return strings.Join(parts, ";"), errs
}

// ownsAddress says whether addr is configured on the port; known is false when the port's
// address comes from the attachment and so cannot be compared before the pod starts.
func (p *plan) ownsAddress(pp *portPlan, addr string) (known, owned bool) {
	want, err := netip.ParseAddr(addr)
	if err != nil {
		return false, false
	}
	sets := [][]string{pp.spec.VIPs}
	if pp.spec.IPv4 != nil {
		if pp.spec.IPv4.From == fsv1.AddressAttachment {
			return false, false
		}
		if pp.v4 != nil {
			sets = append(sets, []string{pp.v4.addr})
		}
	}
	for _, v := range p.vlans {
		if v.spec.Port == pp.spec.Name {
			sets = append(sets, v.spec.VIPs)
			if v.v4 != nil {
				sets = append(sets, []string{v.v4.addr})
			}
		}
	}
	for _, set := range sets {
		for _, s := range set {
			if a, err := netip.ParseAddr(s); err == nil && a == want {
				return true, true
			}
		}
	}
	return true, false
}
