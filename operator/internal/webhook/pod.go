// Package webhook adapts the pure packages to admission: the StackInstance validator and the
// Pod injector. The decisions live in internal/render and internal/inject.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
)

// InjectPath is where the Pod injector is served.
const InjectPath = "/inject-v1-pod"

// PodInjector injects the F-Stack dataplane into pods that name a StackInstance. The webhook
// configuration sends it only pods of opted-in namespaces that carry the stack label.
type PodInjector struct {
	// Reader reads StackInstances (the manager's cache).
	Reader client.Reader
	// Live reads from the API server when the cache has not seen a StackInstance yet: one
	// created a moment before the pods that name it (kubectl apply of both at once).
	Live client.Reader
	// Config is the injector's settings.
	Config inject.Config
	// OwnNamespace is the operator's namespace, never injected: the operator must be able to
	// start when its webhook is down.
	OwnNamespace string
	decoder      admission.Decoder

	mu       sync.Mutex
	prepared map[preparedKey]*inject.Prepared
}

type preparedKey struct {
	uid        types.UID
	generation int64
}

// NewPodInjector returns an injector reading StackInstances from reader, then live on a miss.
func NewPodInjector(reader, live client.Reader, decoder admission.Decoder, cfg inject.Config, ownNamespace string) *PodInjector {
	return &PodInjector{Reader: reader, Live: live, decoder: decoder, Config: cfg, OwnNamespace: ownNamespace, prepared: map[preparedKey]*inject.Prepared{}}
}

// Handle answers one Pod CREATE.
func (h *PodInjector) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		countInjection(resultError, "decode")
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Namespace == h.OwnNamespace {
		return skip("operator-namespace", "the operator's own namespace is never injected")
	}
	if d := inject.Decide(pod); d != inject.Injected {
		if errs := inject.CheckSkipped(pod, d, h.Config); len(errs) > 0 {
			return refuse(pod, &inject.RejectError{Stack: inject.StackName(pod), Errs: errs}, "pod-invalid")
		}
		return skip(string(d), "not injected: "+string(d))
	}
	prep, resp := h.prepare(ctx, req.Namespace, inject.StackName(pod))
	if prep == nil {
		return resp
	}
	out, _, err := prep.Inject(pod)
	if err != nil {
		return refuse(pod, err, "pod-invalid")
	}
	raw, err := json.Marshal(out)
	if err != nil {
		countInjection(resultError, "encode")
		return admission.Errored(http.StatusInternalServerError, err)
	}
	countInjection(resultInjected, "")
	log.FromContext(ctx).V(1).Info("injected", "namespace", req.Namespace, "stack", inject.StackName(pod))
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// prepare finds the named StackInstance and renders it once per generation.
func (h *PodInjector) prepare(ctx context.Context, namespace, name string) (*inject.Prepared, admission.Response) {
	si := &fsv1.StackInstance{}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	err := h.Reader.Get(ctx, key, si)
	if apierrors.IsNotFound(err) && h.Live != nil {
		err = h.Live.Get(ctx, key, si)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			countInjection(resultRefused, "stack-not-found")
			return nil, admission.Denied(fmt.Sprintf(
				"StackInstance %q not found in namespace %q: create it before the pods that name it, or remove the pod label %s",
				name, namespace, fsv1.StackLabel))
		}
		countInjection(resultError, "stack-read")
		return nil, admission.Errored(http.StatusInternalServerError, err)
	}
	pk := preparedKey{si.UID, si.Generation}
	h.mu.Lock()
	prep := h.prepared[pk]
	h.mu.Unlock()
	if prep != nil {
		return prep, admission.Response{}
	}
	prep, err = inject.Prepare(si, h.Config)
	if err != nil {
		return nil, refuse(&corev1.Pod{}, err, "stack-invalid")
	}
	h.mu.Lock()
	if len(h.prepared) > 4096 { // generations move on; forget them all rather than track age
		clear(h.prepared)
	}
	h.prepared[pk] = prep
	h.mu.Unlock()
	return prep, admission.Response{}
}

func skip(reason, msg string) admission.Response {
	countInjection(resultSkipped, reason)
	return admission.Allowed(msg)
}

// refuse turns an injection refusal into the API's Invalid status, so kubectl prints each
// field path and what to do; it is counted as refused for reason, or as an error when err is not
// a refusal.
func refuse(pod *corev1.Pod, err error, reason string) admission.Response {
	var re *inject.RejectError
	if !errors.As(err, &re) {
		countInjection(resultError, "internal")
		return admission.Errored(http.StatusInternalServerError, err)
	}
	countInjection(resultRefused, reason)
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	status := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, name, re.Errs).ErrStatus
	status.Message = re.Error()
	return admission.Response{AdmissionResponse: admissionResponse(&status)}
}
