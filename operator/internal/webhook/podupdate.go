package webhook

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kube-fstack/kube-fstack/internal/inject"
)

// PodUpdatePath is where updates of F-Stack pods are validated.
const PodUpdatePath = "/validate-v1-pod-update"

// PodUpdateValidator judges what the injection webhook (Pod CREATE) never sees: ephemeral
// containers, which reach a running pod through the pods/ephemeralcontainers subresource
// (kubectl debug) and may not mount a volume the injector owns (fstack-vhost is every pod's
// vhost-user sockets on the node), and pod updates that would undo admission (a dataplane image
// outside --allowed-dataplane-images, a removed stack label that every kube-fstack webhook
// selects by, a changed spec snapshot or spec version annotation). The webhook configuration scopes it like the injector and, through
// matchConditions, calls it only for those changes, so other pod updates never depend on the
// operator being up.
//
// Environment such as LD_PRELOAD is left alone: without the shim volume a debug container only
// reaches what it could through pods/exec, the pod's own dataplane.
type PodUpdateValidator struct {
	// Config holds the allowed dataplane images.
	Config inject.Config
	// OwnNamespace is the operator's namespace, never judged (the configuration excludes it too).
	OwnNamespace string
	Decoder      admission.Decoder
}

// Handle answers one UPDATE of a pod or of its pods/ephemeralcontainers.
func (v *PodUpdateValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Namespace == v.OwnNamespace {
		return admission.Allowed("the operator's namespace is not judged")
	}
	pod, old := &corev1.Pod{}, &corev1.Pod{}
	if err := v.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var errs field.ErrorList
	switch req.SubResource {
	case "ephemeralcontainers":
		errs = inject.CheckNewEphemeralContainers(old, pod)
	case "":
		errs = inject.CheckPodUpdate(old, pod, v.Config)
	}
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	status := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, errs).ErrStatus
	return admission.Response{AdmissionResponse: admissionResponse(&status)}
}
