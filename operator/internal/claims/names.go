package claims

import (
	"net/netip"
	"strings"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// ParseName reads the network and the address out of a claim's name, as
// fsv1.NetworkAddressClaimName spells them; ok is false for any other name (a legacy claim's
// included, whose stack's name may hold a dot: it never reads back as that name).
func ParseName(name string) (network string, addr netip.Addr, ok bool) {
	network, rest, found := strings.Cut(name, ".")
	if !found || network == "" {
		return "", netip.Addr{}, false
	}
	sep := "."
	if strings.Count(rest, "-") == 7 {
		sep = ":"
	}
	spelt := strings.ReplaceAll(rest, "-", sep)
	addr, err := netip.ParseAddr(spelt)
	if err != nil || fsv1.NetworkAddressClaimName(network, addr) != name {
		return "", netip.Addr{}, false
	}
	return network, addr, true
}
