package podcontract

// The keys of the pod contract that live on Services: a Service without a selector opts in to
// the operator's EndpointSlices with ServiceStackAnnotation.
const (
	// ServiceStackAnnotation opts a Service without a selector in: the operator publishes its
	// EndpointSlices with the served addresses of the pods bound to the StackInstance it names
	// (same namespace). kube-proxy and CoreDNS read those slices, so the Service's ClusterIP,
	// NodePorts and DNS names lead to F-Stack rather than to the pods' kernel IPs, where nothing
	// of F-Stack's listens. The same key as the pods' stack label, on another kind of object.
	ServiceStackAnnotation = "kubefstack.io/stack"
	// ServiceStackPortAnnotation, beside ServiceStackAnnotation, names the stack port
	// (spec.ports[].name, or its index) whose served addresses the Service's endpoints carry.
	// Without it, port 0: a stack's first port is its service network in every sample, and a
	// Service per data network is how a multi-port stack is reached (one address per endpoint,
	// as kube-proxy and DNS expect).
	ServiceStackPortAnnotation = "kubefstack.io/stack-port"
)

// ClaimNetworkLabel on an AddressClaim names the DataNetwork its address is on (its
// spec.network), so the injector lists one network's claims (the addresses taken there) from
// its cache without reading every claim of the cluster.
const ClaimNetworkLabel = "kubefstack.io/data-network"

// KeyKind says whether a Key is a label or an annotation.
type KeyKind string

const (
	Label      KeyKind = "label"
	Annotation KeyKind = "annotation"
	// CNIArg is a key of a Multus networks entry's cni-args, which reaches the network's plugin
	// as args.cni of its config.
	CNIArg KeyKind = "cni-args key"
	// OVSExternalID is a key of an OVS row's external_ids (ovsids.go).
	OVSExternalID KeyKind = "OVS external_ids key"
	// EnvVar is an environment variable of an injected container that is read from the pod's
	// spec, outside the container (statustoken.go).
	EnvVar KeyKind = "environment variable"
)

// Key is one label or annotation kube-fstack writes or reads, on the object it lives on: the
// registry (Keys) is what docs/reference/pod-contract.md is generated from, and a test holds
// every key the code names to it.
type Key struct {
	Name string
	Kind KeyKind
	// On is the kind of object it lives on.
	On string
	// Writer writes it; Readers read it.
	Writer  string
	Readers string
	// Value says what the value is, Doc why it exists.
	Value string
	Doc   string
}

// The keys api/v1alpha1 owns (the API package imports no other package of the project): Keys
// names them by value, and keys_test.go holds each equal to the API's constant.
const (
	namespaceInjectionLabel = "kubefstack.io/injection"
	podStackLabel           = "kubefstack.io/stack"
	podInjectAnnotation     = "kubefstack.io/inject"
	podStatusAnnotation     = "kubefstack.io/status"
	nodeLabelPattern        = "node.kubefstack.io/<check>"
	nodeReportAnnotation    = "node.kubefstack.io/report"
)

// Keys is the registry of every label, annotation and OVS external_ids key of kube-fstack, and of
// the environment variables other components read from a pod's spec, in the order the reference
// lists them: what a user writes, what the injection writes on a pod, what fstack-cni keeps on
// its ports, what the node agent writes on its Node.
func Keys() []Key { return append([]Key(nil), registry...) }

var registry = []Key{
	{namespaceInjectionLabel, Label, "Namespace", "the platform team", "the pod webhook's namespaceSelector; fstack-cni (which namespaces may have ports)",
		"`enabled`", "Opts the namespace's pods into injection; the webhook never sees a pod of any other namespace."},
	{podStackLabel, Label, "Pod", "the user (the pod template)", "the pod webhook's objectSelector; the StackInstance controller",
		"a StackInstance name in the pod's namespace", "Names the stack the pod runs. Only the label is read, never an annotation of that name."},
	{podInjectAnnotation, Annotation, "Pod", "the user", "the pod webhook", "`false`", "Opts one pod out of injection."},
	{ServiceStackAnnotation, Annotation, "Service", "the user", "the EndpointSlice controller",
		"a StackInstance name in the Service's namespace", "A Service without a selector gets EndpointSlices of the stack's served addresses."},
	{ServiceStackPortAnnotation, Annotation, "Service", "the user", "the EndpointSlice controller",
		"a spec.ports[].name, or its index; default 0", "Which stack port's addresses the Service's endpoints carry."},
	{ClaimNetworkLabel, Label, "AddressClaim", "the injector and the AddressClaim controller (on the claims they make)",
		"the injector (the addresses its cache shows taken on a network)", "a DataNetwork name, the claim's spec.network",
		"Selects one network's claims; the claim's name (`<network>.<address>`) is what holds the address."},
	{podStatusAnnotation, Annotation, "Pod", "the injector", "the injector (re-injection is a no-op)",
		"JSON: what was injected", "Makes injection idempotent."},
	{SpecAnnotation, Annotation, "Pod", "the injector", "the dataplane supervisor (downward API file `spec`; snapshot.Decode)",
		"JSON: the StackInstance spec, defaults applied, each pool port pinned to the pod's address; at most 128 KiB",
		"The stack the pod runs, fixed at admission: a later change of the StackInstance does not reach a running pod."},
	{SpecVersionAnnotation, Annotation, "Pod", "the injector", "the dataplane supervisor (downward API file `spec-version`)",
		"a group/version, `kubefstack.io/v1alpha1`", "The API version of the snapshot, checked before any of it is decoded."},
	{ConfigHashAnnotation, Annotation, "Pod", "the injector", "the StackInstance controller (which pods run an older config)",
		"16 hex digits", "The hash of the config rendered with placeholder facts."},
	{AddressesAnnotation, Annotation, "Pod", "the injector", "the EndpointSlice and AddressClaim controllers, `kubectl fstack status`",
		"`<port index>:<port name>=<address>,...`", "The addresses the pod's F-Stack serves: the one carrier of them."},
	{BindingAnnotation, Annotation, "Pod", "the injector", "fstack-cni without Multus (runtimeConfig pod annotations)",
		"JSON: a binding per interface", "What a vhost-user port's anti-spoofing flows bind beyond its own addresses: VIPs, VLAN addresses, VLAN ids."},
	{CNIArgsBinding, CNIArg, "Multus networks entry", "the injector", "fstack-cni (args.cni)",
		"JSON: the port's binding", "The BindingAnnotation's entry for the interface, on the Multus path."},
	{NetworksAnnotation, Annotation, "Pod", "the user and the injector (an entry per port that names a network)", "Multus",
		"Multus's networks list", "Attaches the pod to the data networks; the injector's entries carry ips, mac and the binding (cni-args)."},
	{AppProbesAnnotation, Annotation, "Pod", "the injector", "people (nothing reads it back)",
		"JSON: the app's probes as written", "Shows the probes the injection moved behind the dataplane's /app-probe."},
	{EnvStatusToken, EnvVar, "the dataplane container (Pod)", "the injector: the webhook, for every pod it admits (`kubectl fstack inject` writes none)",
		"the dataplane supervisor; the operator's dataplane health events, `kubectl fstack status`, `config` and `doctor` (sent as " + StatusTokenHeader + ")",
		"64 hex digits (random, 256 bits); readers accept 32 to 128 of `[A-Za-z0-9_-]`",
		"The pod's read token: the supervisor answers /status and /config to the node and to requests that carry it, no one else."},
	{OVSIDOwner, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "fstack-cni (CHECK, DEL, GC), the flow keeper",
		"`fstack-cni`", "Marks the port as fstack-cni's: nothing else on the bridge is touched."},
	{OVSIDNetwork, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "fstack-cni (CHECK, DEL, GC)",
		"the CNI network name", "Identifies the attachment, with the container ID and interface."},
	{OVSIDContainerID, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "fstack-cni (CHECK, DEL, GC)",
		"the CNI container ID", "Identifies the attachment."},
	{OVSIDIfName, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "fstack-cni (CHECK, DEL, GC)",
		"the pod's interface name", "Identifies the attachment."},
	{OVSIDPodNamespace, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "fstack-cni (GC), the flow keeper's log",
		"the pod's namespace", "Names the pod."},
	{OVSIDPodName, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "fstack-cni (GC), the flow keeper's log",
		"the pod's name", "Names the pod."},
	{OVSIDPodUID, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "fstack-cni (GC), the node agent's cleanup",
		"the pod's UID", "Finds the pod's socket link."},
	{OVSIDMAC, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "the flow keeper (after an OVS restart)",
		"a MAC", "The MAC the port's anti-spoofing rules pass."},
	{OVSIDAddrs, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "the flow keeper (after an OVS restart)",
		"addresses, comma-separated", "The addresses the port's rules bind."},
	{OVSIDVLANs, OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "the flow keeper (after an OVS restart)",
		"VLAN ids, comma-separated", "The VLANs the port may send tagged frames on."},
	{OVSIDHoldsPrefix + "<address>", OVSExternalID, "OVS Interface and Port", "fstack-cni (ADD)", "fstack-cni (ADD of another port)",
		"`held`", "One holder per address on the node: a port's transaction fails when another port holds one of its addresses."},
	{nodeLabelPattern, Label, "Node", "the node agent", "the injected pods' required node affinity, `kubectl fstack doctor`",
		"`ready`, or the fact the check read", "A node capability whose check passed; absent while it fails."},
	{nodeReportAnnotation, Annotation, "Node", "the node agent", "`kubectl fstack doctor`, the operator's node metrics",
		"JSON: the node report", "Every node check with its state and fix."},
}
