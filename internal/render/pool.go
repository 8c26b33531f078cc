package render

import (
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// poolParses counts parsePool's calls, for the test that holds every path to one parse a pool.
var poolParses atomic.Int64

// Pool is a checked spec pool (from: Pool): its addresses in the order pods take them, and the
// prefix length every pod's address gets.
type Pool struct {
	ranges []addrRange
	// Bits is the prefix length of every address of the pool.
	Bits int
	size int
}

type addrRange struct{ first, last netip.Addr }

// Size is the number of addresses in the pool.
func (p *Pool) Size() int { return p.size }

// Addresses calls yield for each address of the pool in the spec's order, until yield returns
// false.
func (p *Pool) Addresses(yield func(netip.Addr) bool) {
	for _, r := range p.ranges {
		for a := r.first; ; a = a.Next() {
			if !yield(a) {
				return
			}
			if a == r.last {
				break
			}
		}
	}
}

// Contains says whether a is one of the pool's addresses.
func (p *Pool) Contains(a netip.Addr) bool {
	for _, r := range p.ranges {
		if r.first.Compare(a) <= 0 && a.Compare(r.last) <= 0 {
			return true
		}
	}
	return false
}

// Prefix is addr with the pool's prefix length, as a port's address is written (10.56.0.11/24).
func (p *Pool) Prefix(addr netip.Addr) string {
	return netip.PrefixFrom(addr, p.Bits).String()
}

// parsePool checks pool (an ipv4 pool when v4, else ipv6) at path: every entry one address or
// first-last of the family, all in one subnet of prefixLength, none its network or broadcast
// address, no address twice, at most 65536 in all. Only Prepare's render calls it: a *Spec
// carries its pools parsed (Spec.Pool), so no later step parses one again.
func parsePool(pool *fsv1.IPPool, v4 bool, path *field.Path) (*Pool, field.ErrorList) {
	poolParses.Add(1)
	fam := familyOf(v4)
	if errs := checkPoolShape(pool, fam, path); len(errs) > 0 {
		return nil, errs
	}
	b := &poolBuilder{p: &Pool{Bits: int(pool.PrefixLength)}, fam: fam, path: path.Child("ranges")}
	for i, entry := range pool.Ranges {
		if !b.add(i, entry) {
			break
		}
	}
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	return b.p, nil
}

// poolFamily is what parsing a pool needs to know of its address family.
type poolFamily struct {
	v4            bool
	name, example string
	maxBits       int
}

func familyOf(v4 bool) poolFamily {
	if v4 {
		return poolFamily{v4: true, name: "IPv4", example: "10.56.0.10-10.56.0.50", maxBits: MaxPrefixLengthIPv4}
	}
	return poolFamily{name: "IPv6", example: "2001:db8::10-2001:db8::40", maxBits: MaxPrefixLengthIPv6}
}

// checkPoolShape checks what comes before the entries: the prefix length and how many there are.
func checkPoolShape(pool *fsv1.IPPool, fam poolFamily, path *field.Path) field.ErrorList {
	switch bits := int(pool.PrefixLength); {
	case bits < MinPrefixLength || bits > fam.maxBits:
		return field.ErrorList{field.Invalid(path.Child("prefixLength"), pool.PrefixLength,
			fmt.Sprintf("an %s prefix length is %d to %d", fam.name, MinPrefixLength, fam.maxBits))}
	case len(pool.Ranges) == 0:
		return field.ErrorList{field.Required(path.Child("ranges"), "list the pool's addresses, e.g. "+fam.example)}
	case len(pool.Ranges) > MaxPoolRanges:
		return field.ErrorList{field.TooMany(path.Child("ranges"), len(pool.Ranges), MaxPoolRanges)}
	}
	return nil
}

// poolBuilder adds a pool's entries one by one, collecting every problem.
type poolBuilder struct {
	p    *Pool
	fam  poolFamily
	path *field.Path // the pool's ranges
	// entries are the spec's text of each of p.ranges, for messages.
	entries []string
	// subnet is the first valid entry's, which every other must be in.
	subnet netip.Prefix
	errs   field.ErrorList
}

// add checks entry i and adds its addresses; false stops the parse (the pool is too large).
func (b *poolBuilder) add(i int, entry string) bool {
	ipath := b.path.Index(i)
	r, err := parseRange(entry, b.fam.v4)
	if len(entry) > MaxPoolRangeLength {
		err = fmt.Sprintf("longer than %d characters", MaxPoolRangeLength)
	}
	if err != "" {
		b.errs = append(b.errs, field.Invalid(ipath, entry, err+"; write one "+b.fam.name+" address, or first-last, e.g. "+b.fam.example))
		return true
	}
	if msg := b.misplaced(r); msg != "" {
		b.errs = append(b.errs, field.Invalid(ipath, entry, msg))
		return true
	}
	for j, o := range b.p.ranges {
		if r.first.Compare(o.last) <= 0 && o.first.Compare(r.last) <= 0 {
			b.errs = append(b.errs, field.Invalid(ipath, entry, fmt.Sprintf("overlaps ranges entry %q: list each address once", b.entries[j])))
		}
	}
	n := rangeSize(r)
	if b.p.size+n > MaxPoolSize {
		b.errs = append(b.errs, field.TooMany(b.path, b.p.size+n, MaxPoolSize))
		return false
	}
	b.p.size += n
	b.p.ranges = append(b.p.ranges, r)
	b.entries = append(b.entries, entry)
	return true
}

// misplaced says why r cannot be in the pool (outside its subnet, or holding the subnet's network
// or broadcast address), or "".
func (b *poolBuilder) misplaced(r addrRange) string {
	if !b.subnet.IsValid() {
		b.subnet = netip.PrefixFrom(r.first, b.p.Bits).Masked()
	}
	subnet := b.subnet
	switch {
	case !subnet.Contains(r.first) || !subnet.Contains(r.last):
		return fmt.Sprintf("outside %s, the subnet of the pool's first entry with prefixLength %d: a pool is one subnet", subnet, b.p.Bits)
	case b.fam.v4 && b.p.Bits < 31 && (r.first == subnet.Addr() || r.last == broadcastAddr(subnet)):
		return fmt.Sprintf("holds the network (%s) or broadcast (%s) address of %s, which no pod may serve",
			subnet.Addr(), broadcastAddr(subnet), subnet)
	}
	return ""
}

func parseRange(entry string, v4 bool) (addrRange, string) {
	firstS, lastS, isRange := strings.Cut(entry, "-")
	first, err := netip.ParseAddr(strings.TrimSpace(firstS))
	if err != nil || first.Is4() != v4 || first.Is4In6() || first.Zone() != "" {
		return addrRange{}, "not an address of the pool's family"
	}
	last := first
	if isRange {
		if last, err = netip.ParseAddr(strings.TrimSpace(lastS)); err != nil || last.Is4() != v4 || last.Is4In6() || last.Zone() != "" {
			return addrRange{}, "the range's end is not an address of the pool's family"
		}
		if last.Less(first) {
			return addrRange{}, "the range ends before it starts"
		}
	}
	if !first.IsGlobalUnicast() && !first.IsPrivate() {
		return addrRange{}, "not a unicast address"
	}
	return addrRange{first, last}, ""
}

// rangeSize is the number of addresses in r, or more than MaxPoolSize.
func rangeSize(r addrRange) int {
	a, b := r.first.As16(), r.last.As16()
	// Any difference above the low 4 bytes is more than a pool may hold.
	for i := 0; i < 12; i++ {
		if a[i] != b[i] {
			return MaxPoolSize + 1
		}
	}
	lo := func(x [16]byte) uint64 {
		return uint64(x[12])<<24 | uint64(x[13])<<16 | uint64(x[14])<<8 | uint64(x[15])
	}
	n := lo(b) - lo(a) + 1
	if n > MaxPoolSize {
		return MaxPoolSize + 1
	}
	return int(n)
}

func broadcastAddr(subnet netip.Prefix) netip.Addr {
	a, _ := netip.ParseAddr(broadcast4(subnet))
	return a
}

// First is the pool's first address, the one a pool port renders with before a pod takes one
// (the stack's preview ConfigMap, `kubectl fstack render`, the config hash every pod records).
func (p *Pool) First() netip.Addr { return p.ranges[0].first }

// poolSet is a spec's parsed pools by field path (spec.ports[0].ipv4.pool). Prepare's render
// parses each pool and records it; every later render of the Spec reads what it recorded.
type poolSet struct {
	byPath map[string]*Pool
	parse  bool
}

// get is the pool at path, parsed now when this is Prepare's render.
func (ps *poolSet) get(pool *fsv1.IPPool, v4 bool, path *field.Path) (*Pool, field.ErrorList) {
	if !ps.parse {
		if p := ps.byPath[path.String()]; p != nil {
			return p, nil
		}
		return nil, field.ErrorList{field.InternalError(path, fmt.Errorf("a pool Prepare did not parse"))}
	}
	p, errs := parsePool(pool, v4, path)
	if len(errs) == 0 {
		ps.byPath[path.String()] = p
	}
	return p, errs
}

// portPoolPath is where spec.ports[port]'s pool of a family is.
func portPoolPath(port int, v4 bool) *field.Path {
	family := "ipv6"
	if v4 {
		family = "ipv4"
	}
	return field.NewPath("spec", "ports").Index(port).Child(family, "pool")
}
