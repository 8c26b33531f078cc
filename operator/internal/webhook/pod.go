// Package webhook adapts the pure packages to admission: the StackInstance validator and the
// Pod injector. The decisions live in internal/render and internal/inject.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
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
	// Claims claims the static and pool addresses of each pod; nil refuses pods of stacks that
	// have any.
	Claims *claims.Claimer
	// Networks holds every pod's ports to their DataNetworks, as on the StackInstance: the
	// network may have changed since, or the stack be older than it. Nil checks none (tests).
	Networks *NetworkChecker
	decoder  admission.Decoder

	prepared *preparedCache
}

// NewPodInjector returns an injector reading StackInstances from reader, then live on a miss.
func NewPodInjector(reader, live client.Reader, decoder admission.Decoder, cfg inject.Config, ownNamespace string) *PodInjector {
	return &PodInjector{Reader: reader, Live: live, decoder: decoder, Config: cfg, OwnNamespace: ownNamespace, prepared: newPreparedCache(defaultCacheBytes)}
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
		return h.skipped(ctx, req, pod, d)
	}
	prep, resp := h.prepare(ctx, req.Namespace, inject.StackName(pod))
	if prep == nil {
		return resp
	}
	// A pod created without a namespace (kubectl create -f in the current namespace) has it only
	// in the request, and the injector compares Multus networks entries by namespace, an entry
	// without one being the pod's; the patch leaves metadata.namespace as it came.
	ns := pod.Namespace
	if ns == "" {
		pod.Namespace = req.Namespace
	}
	// Every check first, with the first pod's addresses (no check depends on them): a pod
	// refused for anything else claims nothing.
	out, _, err := prep.InjectAddresses(pod, prep.FirstAddresses())
	if err != nil {
		return refuse(pod, err, "pod-invalid")
	}
	out.Namespace = ns
	if resp := h.podSecurity(ctx, req.Namespace, pod, out); resp != nil {
		return *resp
	}
	nodes, resp := h.checkNetworks(ctx, req.Namespace, pod, prep)
	if nodes == nil {
		return resp
	}
	if len(prep.AddressNeeds()) > 0 {
		held, err := h.claim(ctx, req, pod, prep)
		if err != nil {
			return refuse(pod, err, "address-taken")
		}
		if out, _, err = prep.InjectAddresses(pod, held.Addrs); err != nil {
			h.Claims.Release(ctx, held)
			return refuse(pod, err, "pod-invalid")
		}
		out.Namespace = ns
	}
	inject.RequireNodeLabels(&out.Spec, nodes)
	raw, err := json.Marshal(out)
	if err != nil {
		countInjection(resultError, "encode")
		return admission.Errored(http.StatusInternalServerError, err)
	}
	countInjection(resultInjected, "")
	log.FromContext(ctx).V(1).Info("injected", "namespace", req.Namespace, "stack", inject.StackName(pod))
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// checkNetworks holds the pod's stack to its DataNetworks and answers the labels the networks
// require of the pod's node; nil with the refusal when they refuse it.
func (h *PodInjector) checkNetworks(ctx context.Context, namespace string, pod *corev1.Pod, prep *inject.Prepared) (map[string]string, admission.Response) {
	if h.Networks == nil {
		return map[string]string{}, admission.Response{}
	}
	nets, errs, err := h.Networks.Check(ctx, namespace, prep.Spec())
	if err != nil {
		countInjection(resultError, "network-read")
		return nil, admission.Errored(http.StatusInternalServerError, err)
	}
	if len(errs) > 0 {
		stack := inject.StackName(pod)
		return nil, refuse(pod, &inject.RejectError{Stack: stack, Errs: field.ErrorList{field.Forbidden(
			field.NewPath("metadata", "labels").Key(fsv1.StackLabel),
			fmt.Sprintf("StackInstance %q is refused by its DataNetwork: %s", stack, errs.ToAggregate()))}}, "network-refused")
	}
	return nets.NodeSelector(), admission.Response{}
}

// claim holds the pod's static and pool addresses (package claims); a pod whose stack has none
// holds nothing.
func (h *PodInjector) claim(ctx context.Context, req admission.Request, pod *corev1.Pod, prep *inject.Prepared) (*claims.Claimed, error) {
	needs := prep.AddressNeeds()
	if h.Claims == nil {
		return nil, errors.New("the injector has no address claimer")
	}
	return h.Claims.Claim(ctx, h.claimFor(req, pod), needs)
}

// claimFor is whom the request's claims are for: the pod's name, or its generateName and "*".
func (h *PodInjector) claimFor(req admission.Request, pod *corev1.Pod) claims.For {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName + "*"
	}
	return claims.For{Namespace: req.Namespace, Stack: inject.StackName(pod), Pod: name, DryRun: req.DryRun != nil && *req.DryRun}
}

// The injector reads the namespace's opt-in label (a metadata-only informer).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// prepare finds the named StackInstance and renders it once per generation. Only a namespace
// that opted in has its StackInstances read: the API server sends no other (the webhook
// configuration's namespaceSelector), so a review for one came from someone else, who gets the
// answer a missing StackInstance gets, whether or not it exists.
func (h *PodInjector) prepare(ctx context.Context, namespace, name string) (*inject.Prepared, admission.Response) {
	notFound := func() admission.Response {
		countInjection(resultRefused, "stack-not-found")
		return admission.Denied(fmt.Sprintf(
			"StackInstance %q not found in namespace %q: create it before the pods that name it, or remove the pod label %s",
			name, namespace, fsv1.StackLabel))
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := h.get(ctx, types.NamespacedName{Name: namespace}, ns); apierrors.IsNotFound(err) {
		return nil, notFound()
	} else if err != nil {
		countInjection(resultError, "stack-read")
		return nil, admission.Errored(http.StatusInternalServerError, err)
	}
	if ns.Labels[fsv1.InjectionLabel] != "enabled" {
		return nil, notFound()
	}
	si := &fsv1.StackInstance{}
	if err := h.get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, si); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFound()
		}
		countInjection(resultError, "stack-read")
		return nil, admission.Errored(http.StatusInternalServerError, err)
	}
	if prep := h.prepared.get(si.UID, si.Generation); prep != nil {
		return prep, admission.Response{}
	}
	prep, err := inject.Prepare(si, h.Config)
	if err != nil {
		return nil, refuse(&corev1.Pod{}, err, "stack-invalid")
	}
	h.prepared.put(si.UID, si.Generation, prep)
	return prep, admission.Response{}
}

// get reads from the cache, then live when the cache has not seen the object yet.
func (h *PodInjector) get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	err := h.Reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && h.Live != nil {
		err = h.Live.Get(ctx, key, obj)
	}
	return err
}

// skipped answers a pod Decide does not inject, once it passes CheckSkipped. One already injected
// (a copy, a workload `kubectl fstack inject` wrote) gets a status token when it has none, so
// that every pod's /status and /config can be read by whoever may read the pod.
func (h *PodInjector) skipped(ctx context.Context, req admission.Request, pod *corev1.Pod, d inject.Decision) admission.Response {
	if errs := inject.CheckSkipped(pod, d, h.Config); len(errs) > 0 {
		return refuse(pod, &inject.RejectError{Stack: inject.StackName(pod), Errs: errs}, "pod-invalid")
	}
	if d != inject.SkippedAlreadyInjected {
		return skip(string(d), "not injected: "+string(d))
	}
	if resp := h.claimInjected(ctx, req, pod); resp != nil {
		return *resp
	}
	changed, err := inject.EnsureStatusToken(pod, h.Config)
	if err != nil {
		countInjection(resultError, "status-token")
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if !changed {
		return skip(string(d), "not injected: "+string(d))
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		countInjection(resultError, "encode")
		return admission.Errored(http.StatusInternalServerError, err)
	}
	countInjection(resultSkipped, string(d))
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// claimInjected holds an already injected pod to what an injection would: the addresses its spec
// snapshot serves of its own are checked against their DataNetworks and claimed for it, so a
// copy of a running pod, or a workload injected offline and applied to every replica, cannot
// serve an address another pod holds. nil lets the pod through.
func (h *PodInjector) claimInjected(ctx context.Context, req admission.Request, pod *corev1.Pod) *admission.Response {
	needs, spec := inject.InjectedAddressNeeds(pod, h.Config.DefaultDataNetwork)
	if len(needs) == 0 {
		return nil
	}
	stack := inject.StackName(pod)
	if h.Networks != nil {
		_, errs, err := h.Networks.Check(ctx, req.Namespace, spec)
		if err != nil {
			countInjection(resultError, "network-read")
			resp := admission.Errored(http.StatusInternalServerError, err)
			return &resp
		}
		if len(errs) > 0 {
			resp := refuse(pod, &inject.RejectError{Stack: stack, Errs: field.ErrorList{field.Forbidden(
				field.NewPath("metadata", "annotations").Key(podcontract.SpecAnnotation),
				fmt.Sprintf("the pod arrives already injected, and its spec snapshot is refused by its DataNetwork: %s", errs.ToAggregate()))}}, "network-refused")
			return &resp
		}
	}
	if h.Claims == nil {
		resp := refuse(pod, errors.New("the injector has no address claimer"), "address-taken")
		return &resp
	}
	if _, err := h.Claims.Claim(ctx, h.claimFor(req, pod), needs); err != nil {
		resp := refuse(pod, err, "address-taken")
		return &resp
	}
	return nil
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
