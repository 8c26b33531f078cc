package v1alpha1

// Labels and annotations that bind workloads to stacks. Pods opt in per namespace and name their
// stack per pod, so the webhook never sees the rest of the cluster.
const (
	// InjectionLabel on a Namespace opts its pods into dataplane injection ("enabled").
	InjectionLabel = "kubefstack.io/injection"
	// StackLabel on a pod names the StackInstance in the pod's namespace. Only the label is read:
	// the webhook and the controller's pod watch select on labels, never on annotations.
	StackLabel = "kubefstack.io/stack"
	// InjectAnnotation set to "false" on a pod opts it out of injection.
	InjectAnnotation = "kubefstack.io/inject"
	// StatusAnnotation records what was injected, so injecting again changes nothing.
	StatusAnnotation = "kubefstack.io/status"
)

// FStackVersion is a released F-Stack version whose config.ini dialect the renderer speaks.
// +kubebuilder:validation:Enum=v1.25;"1.24"
type FStackVersion string

const (
	// FStackV125 is F-Stack v1.25 (bundled DPDK 23.11): key `allow`, `[rss_check]`, virtio_user KNI.
	FStackV125 FStackVersion = "v1.25"
	// FStackV124 is F-Stack 1.24 (bundled DPDK 22.11): key `pci_whitelist`, `[kni] type`.
	FStackV124 FStackVersion = "1.24"
)

// DefaultFStackVersion is the version the dataplane image pins.
const DefaultFStackVersion = FStackV125
