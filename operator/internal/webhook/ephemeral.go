package webhook

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kube-fstack/kube-fstack/internal/inject"
)

// EphemeralPath is where ephemeral containers of F-Stack pods are validated.
const EphemeralPath = "/validate-v1-pod-ephemeralcontainers"

// EphemeralValidator refuses ephemeral containers that mount a volume the injector owns. They
// reach a running pod through the pods/ephemeralcontainers subresource (kubectl debug), an
// UPDATE the injection webhook (Pod CREATE) never sees; mounting fstack-vhost would give the
// debug container every pod's vhost-user sockets on the node. The webhook configuration scopes
// it like the injector: opted-in namespaces, pods with the stack label, never the operator's.
//
// Environment such as LD_PRELOAD is left alone: without the shim volume a debug container only
// reaches what it could reach through pods/exec, the pod's own dataplane.
type EphemeralValidator struct {
	// OwnNamespace is the operator's namespace, never judged (the configuration excludes it too).
	OwnNamespace string
	Decoder      admission.Decoder
}

// Handle answers one UPDATE of pods/ephemeralcontainers.
func (v *EphemeralValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Namespace == v.OwnNamespace || req.SubResource != "ephemeralcontainers" {
		return admission.Allowed("not an ephemeral container of an F-Stack pod")
	}
	pod, old := &corev1.Pod{}, &corev1.Pod{}
	if err := v.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if len(req.OldObject.Raw) > 0 {
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	errs := inject.CheckNewEphemeralContainers(old, pod)
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	status := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, errs).ErrStatus
	return admission.Response{AdmissionResponse: admissionResponse(&status)}
}
