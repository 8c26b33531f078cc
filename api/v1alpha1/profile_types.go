package v1alpha1

// Profile names a set of tuning defaults taken from F-Stack's own documents for one kind of
// traffic. A profile only sets defaults: every value it sets yields to the explicit field.
// docs/profiles.md §1 lists each profile's values next to the F-Stack document they come from.
// +kubebuilder:validation:Enum=LongConnections;ShortConnections;Proxy
type Profile string

const (
	// ProfileLongConnections is for keep-alive traffic: F-Stack's defaults, which its LD_PRELOAD
	// guide measured with Nginx on long connections (pkt_tx_delay 100 µs).
	ProfileLongConnections Profile = "LongConnections"
	// ProfileShortConnections is for one request per connection: pkt_tx_delay 50 µs, the value
	// F-Stack's LD_PRELOAD guide gives for Nginx on short connections.
	ProfileShortConnections Profile = "ShortConnections"
	// ProfileProxy is for a stack that connects out to upstreams on short connections: the
	// [rss_check] table is on whenever spec.rssCheck lists upstreams, and ephemeral ports are
	// picked at random on every connect (config.ini's comments on both).
	ProfileProxy Profile = "Proxy"
)
