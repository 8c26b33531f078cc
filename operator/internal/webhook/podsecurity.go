package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kube-fstack/kube-fstack/internal/logging"
)

// podSecurityChecks are the API server's own Pod Security checks, so the injector judges an
// injected pod exactly as the PodSecurity admission plugin will a moment later.
var podSecurityChecks = func() policy.Evaluator {
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(err) // the library's own checks: cannot be invalid
	}
	return ev
}()

// podSecurity refuses an injected pod that the namespace's enforced Pod Security level forbids,
// naming what of the stack needs more than that level: without it the API server refuses the pod
// after injection, naming only fields the user never wrote (a Deployment's pods just never
// appear). A namespace that cannot be read, or whose labels do not parse, is left to the
// PodSecurity plugin itself. It returns nil when the pod may go on.
func (h *PodInjector) podSecurity(ctx context.Context, namespace string, original, pod *corev1.Pod) *admission.Response {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := h.get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		log.FromContext(ctx).Info("Pod Security level not checked: namespace not readable", logging.KeyNamespace, namespace, logging.KeyErr, err)
		return nil
	}
	defaults := api.Policy{Enforce: api.LevelVersion{Level: api.LevelPrivileged, Version: api.LatestVersion()}}
	p, errs := api.PolicyToEvaluate(ns.Labels, defaults)
	if len(errs) > 0 || p.Enforce.Level == api.LevelPrivileged {
		return nil
	}
	res := policy.AggregateCheckResults(podSecurityChecks.EvaluatePod(p.Enforce, &pod.ObjectMeta, &pod.Spec))
	if res.Allowed {
		return nil
	}
	countInjection(resultRefused, "pod-security")
	resp := admission.Denied(fmt.Sprintf(
		"namespace %q enforces Pod Security %q (label %s), which the injected pod would break: %s. %s",
		namespace, p.Enforce.Level, api.EnforceLevelLabel, res.ForbiddenDetail(), podSecurityHint(original, pod, p.Enforce)))
	return &resp
}

// podSecurityHint says which level the stack needs and why, or that the pod's own fields break
// the level.
func podSecurityHint(original, pod *corev1.Pod, lv api.LevelVersion) string {
	level := lv.Level
	var needs []string
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
			continue
		}
		for _, capability := range c.SecurityContext.Capabilities.Add {
			switch capability {
			case "IPC_LOCK":
				needs = append(needs, "IPC_LOCK for its PCI ports (VFIO pins the mempools)")
			case "NET_ADMIN":
				needs = append(needs, "NET_ADMIN for KNI (the tap in the pod's network namespace)")
			}
		}
	}
	slices.Sort(needs)
	needs = slices.Compact(needs)
	switch {
	case len(needs) > 0:
		return fmt.Sprintf("The stack's dataplane needs %s, which only %q allows: label the namespace %s=%s, or use vhost-user ports only (which meet %q).",
			strings.Join(needs, " and "), api.LevelPrivileged, api.EnforceLevelLabel, api.LevelPrivileged, api.LevelBaseline)
	case level == api.LevelRestricted:
		return fmt.Sprintf("The dataplane runs as root (DPDK's runtime directory and hugepage files), which %q forbids: label the namespace %s=%s.",
			api.LevelRestricted, api.EnforceLevelLabel, api.LevelBaseline)
	case !policy.AggregateCheckResults(podSecurityChecks.EvaluatePod(lv, &original.ObjectMeta, &original.Spec)).Allowed:
		return "The pod as written already breaks it: fix its own fields named above."
	default:
		return fmt.Sprintf("What the injector adds for this stack needs more than %q: label the namespace %s=%s.",
			level, api.EnforceLevelLabel, api.LevelPrivileged)
	}
}
