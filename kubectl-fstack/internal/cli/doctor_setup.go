package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

// The cluster-side setup a newcomer gets wrong first, before any node check matters: a namespace
// used without the opt-in label (its pods are created without a dataplane, silently), a
// NetworkAttachmentDefinition a stack names that is not there, and Multus not answering.

// nadGVK is Multus's NetworkAttachmentDefinition. Read as unstructured: the plugin does not link
// Multus's types for one Get.
var nadGVK = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// The label upstream Multus's DaemonSet manifests (thin and thick) carry.
const (
	multusLabel, multusLabelValue = "app", "multus"
	multusSelector                = multusLabel + "=" + multusLabelValue
)

// SetupCheck is one cluster-side check of doctor's.
type SetupCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// setupFacts is what doctor read of the cluster for the setup checks. A nil map or a nil multus
// means "not read" (an older caller, or an error recorded in notes), and the check is not made.
type setupFacts struct {
	// namespaces: the labels of each namespace with a StackInstance or a pod naming a stack.
	namespaces map[string]map[string]string
	// nads: for each NetworkAttachmentDefinition a stack names (namespace/name), whether it exists.
	nads map[string]bool
	// nadCRDServed is false when the API server does not serve NetworkAttachmentDefinitions.
	nadCRDServed bool
	// multus: Multus's DaemonSets found by multusSelector; nil when not looked for.
	multus []appsv1.DaemonSet
	// notes say what could not be read.
	notes []string
}

// stackNetworks are the NetworkAttachmentDefinitions (namespace/name) each stack's ports name.
func stackNetworks(stacks []fsv1.StackInstance) map[string][]string {
	out := map[string][]string{}
	for _, si := range stacks {
		for i, p := range si.Spec.Ports {
			if p.Network == nil {
				continue
			}
			ns := p.Network.Namespace
			if ns == "" {
				ns = si.Namespace
			}
			key := ns + "/" + p.Network.Name
			out[key] = append(out[key], fmt.Sprintf("%s/%s (spec.ports[%d].network)", si.Namespace, si.Name, i))
		}
	}
	return out
}

// usedNamespaces are the namespaces of the stacks and of the pods naming one.
func usedNamespaces(stacks []fsv1.StackInstance, pods []corev1.Pod) []string {
	seen := map[string]bool{}
	for _, s := range stacks {
		seen[s.Namespace] = true
	}
	for _, p := range pods {
		seen[p.Namespace] = true
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// readSetup reads the namespaces, NetworkAttachmentDefinitions and Multus DaemonSets the setup
// checks need. What it cannot read (RBAC) becomes a note, and that check is not made.
func readSetup(ctx context.Context, c client.Client, stacks []fsv1.StackInstance, pods []corev1.Pod) setupFacts {
	f := setupFacts{namespaces: map[string]map[string]string{}, nads: map[string]bool{}, nadCRDServed: true}
	for _, ns := range usedNamespaces(stacks, pods) {
		n := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			f.notes = append(f.notes, fmt.Sprintf("namespace %s: %v (its opt-in label is not checked)", ns, err))
			continue
		}
		f.namespaces[ns] = n.Labels
		if f.namespaces[ns] == nil {
			f.namespaces[ns] = map[string]string{}
		}
	}
	nets := stackNetworks(stacks)
	keys := make([]string, 0, len(nets))
	for k := range nets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(nadGVK)
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
		switch {
		case err == nil:
			f.nads[k] = true
		case meta.IsNoMatchError(err):
			f.nadCRDServed = false
		case apierrors.IsNotFound(err):
			f.nads[k] = false
		default:
			f.notes = append(f.notes, fmt.Sprintf("NetworkAttachmentDefinition %s: %v (not checked)", k, err))
		}
	}
	if len(nets) == 0 {
		return f // no stack needs Multus: it is not looked for
	}
	list := &appsv1.DaemonSetList{}
	if err := c.List(ctx, list, client.MatchingLabels{multusLabel: multusLabelValue}); err != nil {
		f.notes = append(f.notes, fmt.Sprintf("list DaemonSets %s in every namespace: %v (Multus's is not checked)", multusSelector, err))
		return f
	}
	f.multus = list.Items
	if f.multus == nil {
		f.multus = []appsv1.DaemonSet{}
	}
	return f
}

// judgeSetup turns the facts into setup checks; a failed one is a problem (exit status 1).
func (r *DoctorReport) judgeSetup(in doctorInput) {
	r.SetupNotes = append(r.SetupNotes, in.setup.notes...)
	checks := namespaceChecks(in)
	checks = append(checks, networkChecks(in.stacks, in.setup)...)
	for _, c := range checks {
		r.Setup = append(r.Setup, c)
		if c.Status == string(nodecheck.Fail) {
			r.Problems = append(r.Problems, c.Detail+": "+c.Fix)
		}
	}
}

// namespaceChecks: each namespace with a StackInstance or a pod naming a stack carries the
// opt-in label. An unreadable namespace is left out (a note says so).
func namespaceChecks(in doctorInput) []SetupCheck {
	if in.setup.namespaces == nil {
		return nil
	}
	stacksIn, podsIn := map[string][]string{}, map[string]int{}
	for _, s := range in.stacks {
		stacksIn[s.Namespace] = append(stacksIn[s.Namespace], s.Name)
	}
	for _, p := range in.pods {
		podsIn[p.Namespace]++
	}
	var out []SetupCheck
	for _, ns := range usedNamespaces(in.stacks, in.pods) {
		if labels, ok := in.setup.namespaces[ns]; ok {
			out = append(out, namespaceCheck(ns, namespaceUse(stacksIn[ns], podsIn[ns]), labels))
		}
	}
	return out
}

// namespaceCheck is the opt-in check of namespace ns, which has what, by its labels.
func namespaceCheck(ns, what string, labels map[string]string) SetupCheck {
	c := SetupCheck{Name: "namespace-opt-in"}
	if labels[fsv1.InjectionLabel] == "enabled" {
		c.Status, c.Detail = string(nodecheck.Pass), fmt.Sprintf("namespace %s (%s) is labelled %s=enabled", ns, what, fsv1.InjectionLabel)
		return c
	}
	c.Status = string(nodecheck.Fail)
	c.Detail = fmt.Sprintf("namespace %s has %s but not the label %s=enabled, so its pods are created without a dataplane",
		ns, what, fsv1.InjectionLabel)
	if v, set := labels[fsv1.InjectionLabel]; set {
		c.Detail += fmt.Sprintf(" (it is %q)", v)
	}
	c.Fix = fmt.Sprintf("kubectl label namespace %s %s=enabled --overwrite, list %s in the chart value cni.nodeConfig.namespaces, then recreate its pods",
		ns, fsv1.InjectionLabel, ns)
	return c
}

// networkChecks: when a stack names a network, Multus's API is served, each
// NetworkAttachmentDefinition named exists, and Multus's DaemonSets are ready.
func networkChecks(stacks []fsv1.StackInstance, f setupFacts) []SetupCheck {
	nets := stackNetworks(stacks)
	if len(nets) == 0 || f.nads == nil {
		return nil
	}
	if !f.nadCRDServed {
		return []SetupCheck{{Name: "multus", Status: string(nodecheck.Fail),
			Detail: "the API server does not serve NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1), which " + firstUsers(nets) + " name: Multus is not installed",
			Fix:    "install Multus (docs/quickstart.md, step 1), then the chart with networkAttachmentDefinition.enabled=true"}}
	}
	return append(nadChecks(nets, f.nads), multusChecks(f.multus)...)
}

// nadChecks: each NetworkAttachmentDefinition of nets (namespace/name -> the stacks naming it)
// whose existence is known from nads exists.
func nadChecks(nets map[string][]string, nads map[string]bool) []SetupCheck {
	keys := make([]string, 0, len(nets))
	for k := range nets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []SetupCheck
	for _, k := range keys {
		exists, known := nads[k]
		if !known {
			continue
		}
		ns, name, _ := strings.Cut(k, "/")
		c := SetupCheck{Name: "network-attachment-definition"}
		if exists {
			c.Status, c.Detail = string(nodecheck.Pass), fmt.Sprintf("NetworkAttachmentDefinition %s exists (named by %s)", k, strings.Join(nets[k], ", "))
		} else {
			c.Status = string(nodecheck.Fail)
			c.Detail = fmt.Sprintf("NetworkAttachmentDefinition %s does not exist, and %s name it: Multus fails their pods' sandbox", k, strings.Join(nets[k], ", "))
			c.Fix = fmt.Sprintf("install or upgrade the chart with networkAttachmentDefinition.enabled=true, networkAttachmentDefinition.name=%s and %s in networkAttachmentDefinition.namespaces", name, ns)
		}
		out = append(out, c)
	}
	return out
}

// multusChecks: Multus's DaemonSets (nil: not looked for) are ready on every node they schedule to.
func multusChecks(multus []appsv1.DaemonSet) []SetupCheck {
	if multus == nil {
		return nil
	}
	if len(multus) == 0 {
		// The CRD is served, so something installed Multus's API; its DaemonSet may carry
		// another label (a distribution's own manifests): say so without failing.
		return []SetupCheck{{Name: "multus", Status: string(nodecheck.Warn),
			Detail: fmt.Sprintf("no DaemonSet labelled %s in any namespace, though NetworkAttachmentDefinitions are served", multusSelector),
			Fix:    "make sure Multus runs on every node that runs a stack (its DaemonSet may carry other labels)"}}
	}
	out := make([]SetupCheck, 0, len(multus))
	for _, ds := range multus {
		key := ds.Namespace + "/" + ds.Name
		st := ds.Status
		c := SetupCheck{Name: "multus"}
		if st.DesiredNumberScheduled > 0 && st.NumberReady == st.DesiredNumberScheduled {
			c.Status, c.Detail = string(nodecheck.Pass), fmt.Sprintf("Multus DaemonSet %s: %d of %d ready", key, st.NumberReady, st.DesiredNumberScheduled)
		} else {
			c.Status = string(nodecheck.Fail)
			c.Detail = fmt.Sprintf("Multus DaemonSet %s: %d of %d ready, so pods naming a network on the other nodes get no sandbox", key, st.NumberReady, st.DesiredNumberScheduled)
			c.Fix = fmt.Sprintf("kubectl -n %s describe daemonset %s, and its pods' logs", ds.Namespace, ds.Name)
		}
		out = append(out, c)
	}
	return out
}

func namespaceUse(stacks []string, pods int) string {
	var parts []string
	if len(stacks) > 0 {
		sort.Strings(stacks)
		parts = append(parts, "StackInstance "+strings.Join(stacks, ", "))
	}
	if pods > 0 {
		parts = append(parts, fmt.Sprintf("%d pod(s) labelled %s", pods, fsv1.StackLabel))
	}
	return strings.Join(parts, " and ")
}

// firstUsers names the stacks that name a network, for a message about all of them.
func firstUsers(nets map[string][]string) string {
	var users []string
	for _, u := range nets {
		users = append(users, u...)
	}
	sort.Strings(users)
	if len(users) > 3 {
		return strings.Join(users[:3], ", ") + fmt.Sprintf(" and %d more", len(users)-3)
	}
	return strings.Join(users, ", ")
}

// writeSetup prints the setup checks, then a fix line for each that did not pass.
func (r *DoctorReport) writeSetup(w io.Writer, o doctorTable) error {
	if len(r.Setup) == 0 {
		return nil
	}
	attention := 0
	for _, c := range r.Setup {
		if c.Status != string(nodecheck.Pass) {
			attention++
		}
	}
	fmt.Fprintf(w, "\ncluster setup: %d of %d checks need attention\n", attention, len(r.Setup))
	rows := make([][]string, 0, len(r.Setup))
	for _, c := range r.Setup {
		rows = append(rows, []string{strings.ToUpper(c.Status), c.Name, c.Detail})
	}
	if err := o.printIndented(w, []string{"STATUS", "CHECK", "DETAIL"}, -1, rows); err != nil {
		return err
	}
	for _, c := range r.Setup {
		if c.Status != string(nodecheck.Pass) && c.Fix != "" {
			fmt.Fprintf(w, "  fix %s: %s\n", safe(c.Name), safe(c.Fix))
		}
	}
	return nil
}
