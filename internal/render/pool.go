package render

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// maxPoolSize bounds a pool: the admission webhook walks it to find a free address.
const maxPoolSize = 1 << 16

// maxPoolRanges and maxRangeLen are the CRD's bounds on pool.ranges.
const (
	maxPoolRanges = 64
	maxRangeLen   = 79
)

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

// ParsePool checks pool (an ipv4 pool when v4, else ipv6) at path: every entry one address or
// first-last of the family, all in one subnet of prefixLength, none its network or broadcast
// address, no address twice, at most 65536 in all.
func ParsePool(pool *fsv1.IPPool, v4 bool, path *field.Path) (*Pool, field.ErrorList) {
	family, example := "IPv6", "2001:db8::10-2001:db8::40"
	maxBits := 128
	if v4 {
		family, example, maxBits = "IPv4", "10.56.0.10-10.56.0.50", 32
	}
	bits := int(pool.PrefixLength)
	if bits < 1 || bits > maxBits {
		return nil, field.ErrorList{field.Invalid(path.Child("prefixLength"), pool.PrefixLength,
			fmt.Sprintf("an %s prefix length is 1 to %d", family, maxBits))}
	}
	if len(pool.Ranges) == 0 {
		return nil, field.ErrorList{field.Required(path.Child("ranges"), "list the pool's addresses, e.g. "+example)}
	}
	if len(pool.Ranges) > maxPoolRanges {
		return nil, field.ErrorList{field.TooMany(path.Child("ranges"), len(pool.Ranges), maxPoolRanges)}
	}
	p := &Pool{Bits: bits}
	var errs field.ErrorList
	var subnet netip.Prefix
	for i, entry := range pool.Ranges {
		ipath := path.Child("ranges").Index(i)
		r, err := parseRange(entry, v4)
		if len(entry) > maxRangeLen {
			err = fmt.Sprintf("longer than %d characters", maxRangeLen)
		}
		if err != "" {
			errs = append(errs, field.Invalid(ipath, entry, err+"; write one "+family+" address, or first-last, e.g. "+example))
			continue
		}
		pfx := netip.PrefixFrom(r.first, bits).Masked()
		if !subnet.IsValid() {
			subnet = pfx
		}
		switch {
		case !subnet.Contains(r.first) || !subnet.Contains(r.last):
			errs = append(errs, field.Invalid(ipath, entry, fmt.Sprintf(
				"outside %s, the subnet of the pool's first entry with prefixLength %d: a pool is one subnet", subnet, bits)))
			continue
		case v4 && bits < 31 && (r.first == subnet.Addr() || r.last == broadcastAddr(subnet)):
			errs = append(errs, field.Invalid(ipath, entry, fmt.Sprintf(
				"holds the network (%s) or broadcast (%s) address of %s, which no pod may serve", subnet.Addr(), broadcastAddr(subnet), subnet)))
			continue
		}
		for j, o := range p.ranges {
			if r.first.Compare(o.last) <= 0 && o.first.Compare(r.last) <= 0 {
				errs = append(errs, field.Invalid(ipath, entry, fmt.Sprintf("overlaps ranges entry %q: list each address once", pool.Ranges[j])))
			}
		}
		n := rangeSize(r)
		if p.size+n > maxPoolSize {
			errs = append(errs, field.TooMany(path.Child("ranges"), p.size+n, maxPoolSize))
			break
		}
		p.size += n
		p.ranges = append(p.ranges, r)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return p, nil
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

// rangeSize is the number of addresses in r, or more than maxPoolSize.
func rangeSize(r addrRange) int {
	a, b := r.first.As16(), r.last.As16()
	// Any difference above the low 4 bytes is more than a pool may hold.
	for i := 0; i < 12; i++ {
		if a[i] != b[i] {
			return maxPoolSize + 1
		}
	}
	lo := func(x [16]byte) uint64 {
		return uint64(x[12])<<24 | uint64(x[13])<<16 | uint64(x[14])<<8 | uint64(x[15])
	}
	n := lo(b) - lo(a) + 1
	if n > maxPoolSize {
		return maxPoolSize + 1
	}
	return int(n)
}

func broadcastAddr(subnet netip.Prefix) netip.Addr {
	a, _ := netip.ParseAddr(broadcast4(subnet))
	return a
}

// placeholderPoolAddress is the address a pool port renders with before a pod takes one (the
// stack's preview ConfigMap, `kubectl fstack render`, the config hash every pod records): the
// pool's first address.
func placeholderPoolAddress(pool *fsv1.IPPool, v4 bool, path *field.Path) (string, field.ErrorList) {
	p, errs := ParsePool(pool, v4, path)
	if len(errs) > 0 {
		return "", errs
	}
	var first netip.Addr
	p.Addresses(func(a netip.Addr) bool { first = a; return false })
	return p.Prefix(first), nil
}
