package podcontract

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// AddressesAnnotation names the addresses a pod's F-Stack serves, one entry per address,
// written on the pod by whoever learns them first: the injector at admission for a static or
// pool-allocated address. Readers (the EndpointSlice publisher, the CLI) take them from here
// rather than from status.podIP, which is the kernel's address where nothing of F-Stack's
// listens. The value is a comma-separated list of <port index>=<address>, e.g.
// "0=10.56.0.11,0=2001:db8::11,1=10.57.0.11"; FormatAddresses writes it and ParseAddresses
// reads it back, refusing anything else, since a pod's annotations are the pod's to write.
const AddressesAnnotation = "kubefstack.io/addresses"

// ServedAddress is one entry of AddressesAnnotation: an address without its prefix, and the
// index of the spec.ports entry that serves it.
type ServedAddress struct {
	Port int
	Addr netip.Addr
}

// MaxPorts is the most ports (spec.ports entries) a stack has, the CRD's bound: readers of what a
// pod writes (its addresses annotation, its /status, its spec snapshot in the operator's cache)
// hold it to that. The CRD's marker cannot name a constant; api/v1alpha1's TestBoundsAreTheCRDs
// holds them equal.
const MaxPorts = 16

// maxServedAddresses bounds what ParseAddresses accepts: each port serves at most one IPv4 and
// one IPv6 address.
const maxServedAddresses = 2 * MaxPorts

// FormatAddresses is the AddressesAnnotation value of addrs, in their order.
func FormatAddresses(addrs []ServedAddress) string {
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		parts = append(parts, strconv.Itoa(a.Port)+"="+a.Addr.String())
	}
	return strings.Join(parts, ",")
}

// ParseAddresses reads an AddressesAnnotation value. It refuses the whole value on any entry
// that is not <port index>=<unicast address>, so that a reader never publishes half of what a
// pod wrote.
func ParseAddresses(v string) ([]ServedAddress, error) {
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxServedAddresses {
		return nil, fmt.Errorf("annotation %s: %d entries, at most %d", AddressesAnnotation, len(parts), maxServedAddresses)
	}
	out := make([]ServedAddress, 0, len(parts))
	for i, p := range parts {
		idx, addr, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("annotation %s: entry %d %q is not <port index>=<address>", AddressesAnnotation, i, Printable(p))
		}
		n, err := strconv.Atoi(idx)
		if err != nil || n < 0 || n >= MaxPorts || strconv.Itoa(n) != idx {
			return nil, fmt.Errorf("annotation %s: entry %d: port index %q is not a number from 0 to %d", AddressesAnnotation, i, Printable(idx), MaxPorts-1)
		}
		a, err := netip.ParseAddr(addr)
		if err != nil || a.Zone() != "" || !a.IsGlobalUnicast() && !a.IsPrivate() {
			return nil, fmt.Errorf("annotation %s: entry %d: %q is not a unicast address", AddressesAnnotation, i, Printable(addr))
		}
		out = append(out, ServedAddress{Port: n, Addr: a.Unmap()})
	}
	return out, nil
}
