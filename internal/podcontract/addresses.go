package podcontract

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// AddressesAnnotation names the addresses a pod's F-Stack serves, one entry per address,
// written by the injector at admission for a static or pool-allocated address. Readers (the
// EndpointSlice publisher, the CLI, the AddressClaim controller) take them from here rather
// than from status.podIP, which is the kernel's address where nothing of F-Stack's listens, and
// never from the spec snapshot: this is the one carrier of served addresses. The value is a
// comma-separated list of <port index>:<port name>=<address>, e.g.
// "0:data=10.56.0.11,0:data=2001:db8::11,1:mgmt=10.57.0.11"; FormatAddresses writes it and
// ParseAddresses reads it back, refusing anything else, since a pod's annotations are the pod's
// to write. The port name lets a Service name its stack port (kubefstack.io/stack-port) without
// its reader decoding the snapshot. Operators built before that wrote entries without the name
// (<port index>=<address>), which ParseAddresses still reads, with PortName empty.
const AddressesAnnotation = "kubefstack.io/addresses"

// ServedAddress is one entry of AddressesAnnotation: an address without its prefix, and the
// index and name of the spec.ports entry that serves it.
type ServedAddress struct {
	Port int
	// PortName is the spec.ports entry's name; empty in an entry an older operator wrote.
	PortName string
	Addr     netip.Addr
}

// MaxPorts is the most ports (spec.ports entries) a stack has, the CRD's bound: readers of what a
// pod writes (its addresses annotation, its /status, its spec snapshot) hold it to that. The
// CRD's marker cannot name a constant; api/v1alpha1's TestBoundsAreTheCRDs holds them equal.
const MaxPorts = 16

// MaxPortName is the longest spec.ports[].name, the CRD's bound (TestBoundsAreTheCRDs).
const MaxPortName = 32

// maxServedAddresses bounds what ParseAddresses accepts: each port serves at most one IPv4 and
// one IPv6 address.
const maxServedAddresses = 2 * MaxPorts

// MaxAddressesBytes bounds the AddressesAnnotation value a reader keeps: the longest value
// ParseAddresses accepts (maxServedAddresses entries of index, name and an IPv6 address) is
// under 3 KiB, so a value cut to this length is refused as the whole would have been.
const MaxAddressesBytes = 8 << 10

// rePortName is the CRD's pattern of spec.ports[].name.
var rePortName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// FormatAddresses is the AddressesAnnotation value of addrs, in their order.
func FormatAddresses(addrs []ServedAddress) string {
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		key := strconv.Itoa(a.Port)
		if a.PortName != "" {
			key += ":" + a.PortName
		}
		parts = append(parts, key+"="+a.Addr.String())
	}
	return strings.Join(parts, ",")
}

// ParseAddresses reads an AddressesAnnotation value. It refuses the whole value on any entry
// that is not <port index>[:<port name>]=<unicast address>, so that a reader never publishes
// half of what a pod wrote.
func ParseAddresses(v string) ([]ServedAddress, error) {
	if v == "" {
		return nil, nil
	}
	if len(v) > MaxAddressesBytes {
		return nil, fmt.Errorf("annotation %s: %d bytes, at most %d", AddressesAnnotation, len(v), MaxAddressesBytes)
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxServedAddresses {
		return nil, fmt.Errorf("annotation %s: %d entries, at most %d", AddressesAnnotation, len(parts), maxServedAddresses)
	}
	out := make([]ServedAddress, 0, len(parts))
	for i, p := range parts {
		s, err := parseServed(p)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: entry %d: %w", AddressesAnnotation, i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseServed(p string) (ServedAddress, error) {
	key, addr, ok := strings.Cut(p, "=")
	if !ok {
		return ServedAddress{}, fmt.Errorf("%q is not <port index>:<port name>=<address>", Printable(p))
	}
	idx, name, named := strings.Cut(key, ":")
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 || n >= MaxPorts || strconv.Itoa(n) != idx {
		return ServedAddress{}, fmt.Errorf("port index %q is not a number from 0 to %d", Printable(idx), MaxPorts-1)
	}
	if named && (len(name) > MaxPortName || !rePortName.MatchString(name)) {
		return ServedAddress{}, fmt.Errorf("port name %q is not a spec.ports[].name (a DNS-1123 label of at most %d characters)", Printable(Clip(name, 64)), MaxPortName)
	}
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Zone() != "" || !a.IsGlobalUnicast() && !a.IsPrivate() {
		return ServedAddress{}, fmt.Errorf("%q is not a unicast address", Printable(Clip(addr, 64)))
	}
	return ServedAddress{Port: n, PortName: name, Addr: a.Unmap()}, nil
}
