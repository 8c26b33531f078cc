package render

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The kinds of bound the CRD's schema sets, each reported the way the API server reports it.

// bounds collects schema violations.
type bounds struct{ errs field.ErrorList }

func (c *bounds) add(e *field.Error) { c.errs = append(c.errs, e) }

// in checks lo <= v <= hi.
func (c *bounds) in(p *field.Path, v, lo, hi int64) {
	if v < lo || v > hi {
		c.add(field.Invalid(p, v, fmt.Sprintf("must be between %d and %d", lo, hi)))
	}
}

// nonZeroIn checks a field whose zero value means "not set" (omitempty, defaulted later).
func (c *bounds) nonZeroIn(p *field.Path, v, lo, hi int64) {
	if v != 0 {
		c.in(p, v, lo, hi)
	}
}

func (c *bounds) atLeast(p *field.Path, v, lo int64) {
	if v < lo {
		c.add(field.Invalid(p, v, fmt.Sprintf("must be at least %d", lo)))
	}
}

func (c *bounds) optAtLeast(p *field.Path, v *int32, lo int64) {
	if v != nil {
		c.atLeast(p, int64(*v), lo)
	}
}

// str checks an optional string: "" is unset; maxLen 0 means no length bound, re nil no pattern.
func (c *bounds) str(p *field.Path, v string, maxLen int, re *regexp.Regexp) {
	if v == "" {
		return
	}
	if maxLen > 0 && utf8.RuneCountInString(v) > maxLen {
		c.add(field.TooLong(p, "", maxLen))
		return
	}
	if re != nil && !re.MatchString(v) {
		c.add(field.Invalid(p, shorten(v), "must match "+re.String()))
	}
}

// shorten keeps a hostile value from filling the error message (and the log it lands in).
func shorten(v string) string {
	const keep = 64
	if len(v) <= keep {
		return v
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(v[:keep], ""), len(v))
}

// required checks a string the schema requires, then its bounds.
func (c *bounds) required(p *field.Path, v string, maxLen int, re *regexp.Regexp) {
	if v == "" {
		c.add(field.Required(p, ""))
		return
	}
	c.str(p, v, maxLen, re)
}

func (c *bounds) enum(p *field.Path, v string, allowed ...string) {
	if v == "" {
		return
	}
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	c.add(field.NotSupported(p, shorten(v), allowed))
}

// count checks a list's length; a list present but empty is what the API server refuses as
// fewer than minItems, although Go's omitempty would drop it again.
func (c *bounds) count(p *field.Path, n int, present bool, minItems, maxItems int) {
	switch {
	case present && n < minItems:
		c.add(field.Invalid(p, n, fmt.Sprintf("must have at least %d item(s)", minItems)))
	case maxItems > 0 && n > maxItems:
		c.add(field.TooMany(p, n, maxItems))
	}
}

// strings checks a list of strings: its length, each item, and with set no duplicates.
func (c *bounds) strings(p *field.Path, list []string, maxItems, itemLen int, re *regexp.Regexp, set bool) {
	c.count(p, len(list), false, 0, maxItems)
	for i, v := range list {
		c.str(p.Index(i), v, itemLen, re)
	}
	if set {
		noDuplicates(c, p, list)
	}
}

// noDuplicates reports every item equal to an earlier one (listType=set, or a list map's keys).
func noDuplicates[T comparable](c *bounds, p *field.Path, list []T) {
	seen := make(map[T]bool, len(list))
	for i, v := range list {
		if seen[v] {
			var shown any = v
			if s, ok := shown.(string); ok {
				shown = shorten(s)
			}
			c.add(field.Duplicate(p.Index(i), shown))
		}
		seen[v] = true
	}
}

// tunables checks a map of FreeBSD tunables: how many, and each name's and value's length. Keys
// are shortened in the path too: a hostile key must not fill the message either.
func (c *bounds) tunables(p *field.Path, m map[string]string, maxValue int) {
	if len(m) > maxTunables {
		c.add(field.TooMany(p, len(m), maxTunables))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch {
		case utf8.RuneCountInString(k) > maxTunableName:
			c.add(field.TooLong(p.Key(shorten(k)), "", maxTunableName))
		case utf8.RuneCountInString(v) > maxValue:
			c.add(field.TooLong(p.Key(k), "", maxValue))
		}
	}
}

// quantity checks a quantity's length. The schema bounds the text as written, which the parsed
// value no longer has; its canonical form is never longer than the text (a huge value prints
// clamped or with a suffix), so whatever this refuses the API server refuses too.
func (c *bounds) quantity(p *field.Path, q *resource.Quantity) {
	if q == nil {
		return
	}
	if cp := q.DeepCopy(); len(cp.String()) > maxQuantity { // String caches: never change the input
		c.add(field.TooLong(p, "", maxQuantity))
	}
}

// resources checks the dataplane's extra resources: how many limits, requests and claims, and
// the length of every name and quantity in them.
func (c *bounds) resources(r *corev1.ResourceRequirements, p *field.Path) {
	for _, l := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		lp := p.Child(l.name)
		if len(l.list) > maxResources {
			c.add(field.TooMany(lp, len(l.list), maxResources))
		}
		for _, name := range slices.Sorted(maps.Keys(l.list)) {
			if utf8.RuneCountInString(string(name)) > maxResourceName {
				c.add(field.TooLong(lp.Key(shorten(string(name))), "", maxResourceName))
				continue
			}
			q := l.list[name]
			c.quantity(lp.Key(string(name)), &q)
		}
	}
	cp := p.Child("claims")
	c.count(cp, len(r.Claims), false, 0, maxResources)
	names := make([]string, len(r.Claims))
	for i, cl := range r.Claims {
		names[i] = cl.Name
		c.required(cp.Index(i).Child("name"), cl.Name, maxDNSLabel, nil)
		c.str(cp.Index(i).Child("request"), cl.Request, maxDNSLabel, nil)
	}
	noDuplicates(c, cp, names)
}
