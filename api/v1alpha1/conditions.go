package v1alpha1

// Condition types of StackInstance status. They live with the API, beside the reasons, so every
// reader (the controller, the CLI, tests, a user's tooling) names them from one place.
const (
	// ConditionValid is True when the spec passes every check that can be made before a pod starts.
	ConditionValid = "Valid"
	// ConditionReady is True when every bound pod runs the stack and reports ready.
	ConditionReady = "Ready"
	// ConditionConfigMap is True when the StackInstance's ConfigMap <name>-fstack holds the
	// rendered preview; False when it cannot be written, e.g. because another ConfigMap has the name.
	ConditionConfigMap = "ConfigMap"
)

// Reasons of the StackInstance conditions.
const (
	// ReasonValid: the spec passes every check possible before a pod starts (Valid).
	ReasonValid = "Valid"
	// ReasonInvalidSpec: the spec is invalid (every condition says so).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonNoBoundPods: no pod carries the StackLabel naming this StackInstance (Ready).
	ReasonNoBoundPods = "NoBoundPods"
	// ReasonPodsNotReady: some bound pods have no ready dataplane yet (Ready).
	ReasonPodsNotReady = "PodsNotReady"
	// ReasonAllPodsReady: every bound pod has a ready dataplane (Ready).
	ReasonAllPodsReady = "AllPodsReady"
	// ReasonOlderConfig: every bound pod is ready, some run the config of an older spec (Ready).
	ReasonOlderConfig = "PodsRunOlderConfig"
	// ReasonPodListFailed: the bound pods could not be listed, so the counts are those last
	// observed (Ready, status Unknown).
	ReasonPodListFailed = "PodListFailed"
	// ReasonConfigMapOK: the ConfigMap holds the preview of the current spec (ConfigMap).
	ReasonConfigMapOK = "UpToDate"
	// ReasonConfigMapConflict: another ConfigMap has the name; the operator leaves it alone (ConfigMap).
	ReasonConfigMapConflict = "ConfigMapConflict"
	// ReasonConfigMapFailed: the API server refused the ConfigMap write; the operator retries (ConfigMap).
	ReasonConfigMapFailed = "ConfigMapWriteFailed"
)
