package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

type doctorOptions struct {
	clusterFlags
	output *outputFlags
	// table is --no-headers and --sort-by, which orders the nodes (in -o json too).
	table tableFlags
	// reader reads the pods' /status; nil: through the API server's pod proxy.
	reader podStatusReader
}

func newDoctorCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor [-n NAMESPACE] [-o wide|json|yaml] [--no-headers] [--sort-by JSONPATH] [NODE]",
		Short: "Print each node's kube-fstack report (the node agent's checks), which StackInstances need each check, and what to do about each failed one",
		Long: `Print each node's kube-fstack report (or NODE's): every check the node agent made, the
StackInstances that need it (those of -n's namespace when -n is given, else of every namespace),
and what to do about each failed check. A stack needs what the injector's node affinity asks for:
the static CPU manager, free hugepages of its page size and the dataplane's seccomp profile always,
vhost-user for a vhost-user port, vfio for a PCI function named by its address. A failed check no
stack needs is shown as "not needed".

Then the bound pods, from each running one's supervisor (its /status, read through the API
server's pod proxy): a pod whose dataplane is not ready or has a port whose link is down fails,
with the supervisor's reason (one still starting, within its first 2 minutes, is a warning); a
pod that restarted F-Stack or an app in place within the last hour is a warning, with the last
restart's reason.

Then the cluster's setup, what a newcomer gets wrong first: each namespace with a StackInstance
or a pod naming a stack must carry the label kubefstack.io/injection=enabled; each
NetworkAttachmentDefinition a stack's port names (spec.ports[].network) must exist; and when a
stack names one, Multus must answer (NetworkAttachmentDefinitions served, its DaemonSet,
labelled app=multus, ready on every node it schedules to; none found is a warning).

Exit status 0 when nothing above is a problem: warnings, and failed node checks no stack needs,
do not count. Exit status 1 when something is (each printed on stderr as "error: ..."): a stack
that cannot run where it must (a pod of it on a node, NODE or any when none is named, that
lacks what the stack needs; or, with no NODE, no node examined can run it), a failed pod, a
failed setup check. Exit status 2 when doctor could not look, so it judged nothing: no
kubeconfig, no API server or a timeout, nodes or the stacks' pods it may not list (RBAC), a
NODE that does not exist, a wrong flag or argument. What it may not read beyond those
(StackInstances, a namespace, a NetworkAttachmentDefinition, DaemonSets, a pod's /status) is
a warning on stderr, and that part is not judged.

-o wide adds each check's node label; --no-headers leaves out the tables' header lines (STATUS
CHECK DETAIL ...), as kubectl get's; -o json|yaml prints a DoctorReport (apiVersion
cli.kubefstack.io/v1alpha1).`,
		Args: func(cmd *cobra.Command, args []string) error { return couldNotLook(cobra.MaximumNArgs(1)(cmd, args)) },
		RunE: func(cmd *cobra.Command, args []string) error {
			err := o.run(cmd, stdout, stderr, args)
			if errors.Is(err, errReported) {
				return err // problems found: exit status 1
			}
			return couldNotLook(err)
		},
	}
	// A CI gate tells a wrong invocation from problems found.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return couldNotLook(err) })
	o.add(cmd.Flags())
	o.output = newOutputFlags(cmd)
	o.table.add(cmd, "Sort the nodes by a JSONPath over each node as in -o json's nodes (.name, .report), e.g. --sort-by=.name; by name when not given")
	cmd.ValidArgsFunction = completeNames(&o.clusterFlags, nodeNames)
	completeNamespaceFlag(cmd, &o.clusterFlags)
	return cmd
}

func (o *doctorOptions) run(cmd *cobra.Command, stdout, stderr io.Writer, args []string) error {
	if err := o.output.validate(); err != nil {
		return err
	}
	if o.table.sortBy != "" {
		if _, err := sortPath(o.table.sortBy); err != nil {
			return err
		}
	}
	cfg, ns, err := o.restConfig()
	if err != nil {
		return err
	}
	if !o.namespaceGiven(cmd.Flags()) {
		ns = ""
	}
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	reader := o.reader
	if reader == nil {
		if reader, err = newProxyStatusReader(cfg); err != nil {
			return err
		}
	}
	in, err := fetchDoctorInput(context.Background(), c, reader, ns, args)
	if err != nil {
		return err
	}
	r := buildDoctorReport(in)
	if err := sortByPath(r.Nodes, o.table.sortBy); err != nil {
		return err
	}
	if table, wide := o.output.table(); table {
		if err := r.writeTable(stdout, doctorTable{wide: wide, noHeaders: o.table.noHeaders}); err != nil {
			return err
		}
	} else if err := o.output.printObject(r, stdout); err != nil {
		return err
	}
	return r.writeVerdict(stderr)
}

// fetchDoctorInput makes every API call doctor needs: the nodes (the one named in args, or all),
// the StackInstances and their pods in ns ("": every namespace), the running pods' /status
// through reader, and the setup's objects. What it may not read is noted in the input, and
// judged as unknown, rather than failing.
func fetchDoctorInput(ctx context.Context, c client.Client, reader podStatusReader, ns string, args []string) (doctorInput, error) {
	var nodes []corev1.Node
	if len(args) == 1 {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: args[0]}, n); err != nil {
			return doctorInput{}, fmt.Errorf("node %s: %w", args[0], err)
		}
		nodes = []corev1.Node{*n}
	} else {
		list := &corev1.NodeList{}
		if err := c.List(ctx, list); err != nil {
			return doctorInput{}, fmt.Errorf("list nodes: %w", err)
		}
		nodes = list.Items
	}
	in := doctorInput{nodes: nodes, named: len(args) == 1, now: time.Now()}
	stacks := &fsv1.StackInstanceList{}
	if err := c.List(ctx, stacks, client.InNamespace(ns)); err != nil {
		// The checks are still worth seeing; who needs them is not known.
		in.stacksErr = fmt.Sprintf("list StackInstances in %s: %v", nsText(ns), err)
		return in, nil
	}
	in.stacks = stacks.Items
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), client.HasLabels{fsv1.StackLabel}); err != nil {
		return doctorInput{}, fmt.Errorf("list the pods of StackInstances in %s: %w", nsText(ns), err)
	}
	in.pods = pods.Items
	var ptrs []*corev1.Pod
	for i := range pods.Items {
		if onNamedNode(in, &pods.Items[i]) {
			ptrs = append(ptrs, &pods.Items[i])
		}
	}
	in.statuses = readStatuses(ctx, reader, ptrs)
	in.setup = readSetup(ctx, c, in.stacks, in.pods)
	return in, nil
}

// DoctorReport is what `doctor -o json|yaml` prints.
type DoctorReport struct {
	metav1.TypeMeta `json:",inline"`
	Nodes           []NodeDoctor `json:"nodes"`
	Stacks          []StackNeeds `json:"stacks"`
	// StacksError says why the StackInstances could not be read; then no check has neededBy.
	StacksError string `json:"stacksError,omitempty"`
	// Pods are the bound pods whose dataplane needs attention, by the supervisor's /status.
	Pods []PodDoctor `json:"pods"`
	// PodsChecked counts the running bound pods whose /status was read.
	PodsChecked int `json:"podsChecked"`
	// PodNotes say why some running pods' /status could not be read (then they are not judged).
	PodNotes []string `json:"podNotes,omitempty"`
	// Setup are the cluster-side checks: each used namespace's opt-in label, each
	// NetworkAttachmentDefinition a stack names, Multus.
	Setup []SetupCheck `json:"setup"`
	// SetupNotes say what the setup checks could not read (then that check is not made).
	SetupNotes []string `json:"setupNotes,omitempty"`
	// Problems are the reasons for exit status 1: a stack that cannot run where it must, a pod
	// whose dataplane is not ready or has a port down, a failed setup check.
	Problems []string `json:"problems"`
}

// PodDoctor is a bound pod whose dataplane needs attention.
type PodDoctor struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node,omitempty"`
	// Status is "fail" (not ready, a port down) or "warn" (starting, restarted in place lately).
	Status string `json:"status"`
	// Detail says what is wrong, with the supervisor's reason.
	Detail string `json:"detail"`
	// Ready and Reason are the supervisor's.
	Ready     bool                     `json:"ready"`
	Reason    string                   `json:"reason,omitempty"`
	DownPorts []podcontract.PortStatus `json:"downPorts,omitempty"`
	// InPlaceRestarts are the dataplane's, AppRestarts the apps' (all of them since the pod started).
	InPlaceRestarts int64 `json:"inPlaceRestarts"`
	AppRestarts     int64 `json:"appRestarts"`
	// LastRestart is the latest in-place restart, of the dataplane or an app (Of names which).
	LastRestart *podcontract.RestartRecord `json:"lastRestart,omitempty"`
	LastOf      string                     `json:"lastOf,omitempty"`
}

// NodeDoctor is one node.
type NodeDoctor struct {
	Name string `json:"name"`
	// Report is false when the node agent published no report; ReportError when it is unreadable.
	Report      bool   `json:"report"`
	ReportError string `json:"reportError,omitempty"`
	// Labels are the node's node.kubefstack.io/ labels, the ones the scheduler matches.
	Labels map[string]string `json:"labels"`
	Checks []DoctorCheck     `json:"checks"`
	// CanRun and CannotRun are the stacks (namespace/name) whose node affinity this node meets or not.
	CanRun    []string       `json:"canRun"`
	CannotRun []StackMissing `json:"cannotRun"`
}

// DoctorCheck is one of the node agent's checks and the stacks that need it.
type DoctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
	// Label is the node label the check decides, empty when it decides none.
	Label string `json:"label,omitempty"`
	// NeededBy are the stacks (namespace/name) whose node affinity asks for Label.
	NeededBy []string `json:"neededBy"`
}

// StackMissing is a stack a node cannot run and the labels it lacks.
type StackMissing struct {
	Stack   string   `json:"stack"`
	Missing []string `json:"missing"`
}

// StackNeeds is one StackInstance: what a node must have for it, where it can run.
type StackNeeds struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Requires are the node labels its pods' node affinity asks for (key=value).
	Requires []string `json:"requires"`
	// Error says why the requirements are unknown (the injector refuses the stack).
	Error string `json:"error,omitempty"`
	// Nodes are the nodes examined that can run it; PodNodes those its pods are on.
	Nodes    []string `json:"nodes"`
	PodNodes []string `json:"podNodes"`
}

// doctorInput is what doctor read from the cluster, all buildDoctorReport judges.
type doctorInput struct {
	nodes     []corev1.Node
	named     bool // one node was named: judge only the stacks with pods on it
	stacks    []fsv1.StackInstance
	stacksErr string
	pods      []corev1.Pod
	statuses  podStatuses
	setup     setupFacts
	now       time.Time
}

type stackReqs struct {
	key  string // namespace/name
	reqs []corev1.NodeSelectorRequirement
	sel  labels.Selector
	err  string
}

// requirements are a stack's node requirements as the injector computes them for its pods'
// node affinity: the same function, so doctor cannot disagree with the scheduler.
func requirements(si *fsv1.StackInstance) stackReqs {
	s := stackReqs{key: si.Namespace + "/" + si.Name, sel: labels.NewSelector()}
	checked, errs := render.Prepare(&si.Spec)
	if len(errs) > 0 {
		s.err = (&render.ValidationError{Errs: errs}).Error()
		return s
	}
	s.reqs = checked.NodeRequirements()
	for _, r := range s.reqs {
		req, err := labels.NewRequirement(r.Key, selection.Operator(strings.ToLower(string(r.Operator))), r.Values)
		if err != nil {
			s.err = err.Error()
			return s
		}
		s.sel = s.sel.Add(*req)
	}
	return s
}

func (s stackReqs) needs(label string) bool {
	return slices.ContainsFunc(s.reqs, func(r corev1.NodeSelectorRequirement) bool { return r.Key == label })
}

// missing are the requirements n's labels do not meet.
func (s stackReqs) missing(n *corev1.Node) []string {
	var out []string
	for _, r := range s.reqs {
		req, _ := labels.NewRequirement(r.Key, selection.Operator(strings.ToLower(string(r.Operator))), r.Values)
		if !req.Matches(labels.Set(n.Labels)) {
			out = append(out, r.Key+"="+strings.Join(r.Values, ","))
		}
	}
	return out
}
