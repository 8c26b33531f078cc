package render

// The CRD's bounds the renderer enforces again: the dataplane and the CLI check specs no API
// server saw. A marker cannot name a Go constant, so api/v1alpha1's TestBoundsAreTheCRDs holds
// each of these to the generated CRD; change the marker and the constant together.
const (
	// MaxPoolRanges and MaxPoolRangeLength bound a pool's ranges: how many, and each entry's
	// length (an IPv6 range of two full-length addresses and a dash).
	MaxPoolRanges      = 64
	MaxPoolRangeLength = 79
	// MaxPoolSize bounds a pool's addresses (its ranges' description states it): the admission
	// webhook walks a pool to find a free address.
	MaxPoolSize = 1 << 16
	// MinPrefixLength, MaxPrefixLengthIPv4 and MaxPrefixLengthIPv6 bound a pool's prefixLength
	// (the IPv4 one is a CEL rule of the IPv4 address).
	MinPrefixLength     = 1
	MaxPrefixLengthIPv4 = 32
	MaxPrefixLengthIPv6 = 128
	// MaxVIPs is F-Stack's VIP_MAX_NUM: it silently drops VIPs past the 64th (vips, vips6).
	MaxVIPs = 64
	// MaxRSSEntries is the [rss_check] table's 16 x 4 layout (rssCheck.entries).
	MaxRSSEntries = 64
	// MaxPort is the largest TCP or UDP port (rssCheck.entries[].remotePort).
	MaxPort = 65535
	// MaxPcapDirectory leaves room for the longest file name F-Stack appends to savepath, which
	// must stay under 64 characters (docs/fstack-rules.md R25).
	MaxPcapDirectory = 63 - pcapNameBudget
)

// The sizes the CRD's CEL rules set (api/v1alpha1 says why each is one no real spec reaches).
const (
	MaxResources    = 16
	MaxResourceName = 253
	MaxQuantity     = 64
	MaxTunableName  = 128
	MaxBootValue    = 128
	MaxSysctlValue  = 256
	MaxDNSLabel     = 63
)

// pcapNameBudget is the longest file name F-Stack appends to savepath: "/cpu127_4294967295.pcap".
const pcapNameBudget = 23
