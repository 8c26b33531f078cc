package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodefit"
)

type statusOptions struct {
	clusterFlags
	output        *outputFlags
	allNamespaces bool
	table         tableFlags
	selector      string
	// reader reads the pods' /status; nil: through the API server's pod proxy.
	reader podStatusReader
}

func newStatusCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status [-n NAMESPACE | -A] [-l SELECTOR] [-o wide|name|json|yaml] [--no-headers] [--sort-by JSONPATH] [STACK]",
		Short: "Show each pod bound to a StackInstance: node, config (current or old), dataplane state and restarts",
		Long: `List the StackInstances of a namespace (or the one named) and every pod labelled
kubefstack.io/stack with its name: the node it runs on, the config hash it was admitted with and
whether that is the StackInstance's current one (old: recreate the pod to apply the current
spec), the state of its dataplane container and how often it and the apps restarted.

The dataplane's supervisor restarts F-Stack, and the launcher the app, inside their containers,
which the containers' restart count does not show: for each running pod the supervisor's
/status (read through the API server's pod proxy, which needs get on pods/proxy) adds those
restarts ("3 (2 in place)") and, for a pod that is not ready, why ("Running, not ready: port 0
(attachment net1): link down for 12s ..."). When it cannot be read the columns show the
containers' restarts only and a warning says why, once.

-o wide adds the pod's IP and the dataplane's image; -o json|yaml prints a StackStatusList
(apiVersion cli.kubefstack.io/v1alpha1), the same facts as fields instead of the table's text;
-o name prints stackinstance.kubefstack.io/<name> of each StackInstance, as kubectl get -o name.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(cmd.Context(), stdout, stderr, name)
		},
	}
	o.add(cmd.Flags())
	o.output = newOutputFlags(cmd).withNames(cmd)
	o.table.add(cmd, "Sort the table's rows by a JSONPath over each row: the StackInstance's fields as in -o json (.namespace, .name, .ready) and the pod's under .pod (.pod.node, .pod.dataplane.restarts), e.g. --sort-by=.pod.node")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "Selector (label query) on the StackInstances, as kubectl get's: -l key1=value1,key2=value2, -l 'env in (prod)'")
	cmd.ValidArgsFunction = completeNames(&o.clusterFlags, stackNames)
	completeNamespaceFlag(cmd, &o.clusterFlags)
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "every namespace")
	return cmd
}

// client builds a client from the kubeconfig and returns it with the namespace to look in, and
// the reader of the pods' /status.
func (o *statusOptions) client() (client.Client, string, podStatusReader, error) {
	cfg, ns, err := o.restConfig()
	if err != nil {
		return nil, "", nil, err
	}
	c, err := newClient(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	if o.allNamespaces {
		ns = ""
	}
	r := o.reader
	if r == nil {
		if r, err = newProxyStatusReader(cfg); err != nil {
			return nil, "", nil, err
		}
	}
	return c, ns, r, nil
}

// newClient is a client for the core and apps APIs and kube-fstack's.
func newClient(cfg *rest.Config) (client.Client, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := fsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	return c, nil
}

func (o *statusOptions) run(ctx context.Context, stdout, stderr io.Writer, name string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := o.validate(name); err != nil {
		return err
	}
	c, ns, reader, err := o.client()
	if err != nil {
		return err
	}
	stacks, err := listStacks(ctx, c, ns, name, o.selector)
	if err != nil {
		return err
	}
	if len(stacks) == 0 && o.selector != "" {
		return fmt.Errorf("no StackInstances in %s match -l %s", nsText(ns), o.selector)
	}
	if len(stacks) == 0 {
		return fmt.Errorf("no StackInstances in %s", nsText(ns))
	}
	if o.output.name() {
		// The StackInstances alone: their pods' facts are not asked for.
		for i := range stacks {
			if _, err := fmt.Fprintf(stdout, "stackinstance.%s/%s\n", fsv1.GroupVersion.Group, safe(stacks[i].Name)); err != nil {
				return err
			}
		}
		return nil
	}
	podsOf := make([][]corev1.Pod, len(stacks))
	var all []*corev1.Pod
	for i := range stacks {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(stacks[i].Namespace),
			client.MatchingLabels{fsv1.StackLabel: stacks[i].Name}); err != nil {
			return fmt.Errorf("list the pods of StackInstance %s/%s: %w", stacks[i].Namespace, stacks[i].Name, err)
		}
		podsOf[i] = pods.Items
		for j := range pods.Items {
			all = append(all, &pods.Items[j])
		}
	}
	st := readStatuses(ctx, reader, all)
	if st.unschedulable, err = unschedulableWhy(ctx, c, all); err != nil {
		fmt.Fprintln(stderr, "warning:", safe(err.Error()))
	}
	l := newStackStatusList()
	for i := range stacks {
		l.addStack(&stacks[i], podsOf[i], st)
	}
	// Said once per cause, on stderr: the table and -o json stay what scripts parse.
	for _, n := range st.notes() {
		fmt.Fprintln(stderr, "warning:", safe(n))
	}
	if table, wide := o.output.table(); table {
		return l.writeTable(stdout, statusTable{withNamespace: ns == "", wide: wide, tableFlags: o.table})
	}
	return o.output.printObject(l, stdout)
}

// validate fails early, before the cluster is asked, on flags that do not go together or do not parse.
func (o *statusOptions) validate(name string) error {
	if name != "" && o.allNamespaces {
		return fmt.Errorf("name a StackInstance or give -A, not both")
	}
	if name != "" && o.selector != "" {
		return fmt.Errorf("name a StackInstance or give -l, not both")
	}
	if _, err := labels.Parse(o.selector); err != nil {
		return fmt.Errorf("-l %q: %w", o.selector, err)
	}
	if err := o.output.validate(); err != nil {
		return err
	}
	return o.table.validate(o.output)
}

func listStacks(ctx context.Context, c client.Client, ns, name, selector string) ([]fsv1.StackInstance, error) {
	if name != "" {
		si := &fsv1.StackInstance{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, si)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("StackInstance %q not found in namespace %q", name, ns)
		}
		if err != nil {
			return nil, fmt.Errorf("get StackInstance %s/%s: %w", ns, name, err)
		}
		return []fsv1.StackInstance{*si}, nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("-l %q: %w", selector, err)
	}
	list := &fsv1.StackInstanceList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list StackInstances in %s: %w", nsText(ns), err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return list.Items, nil
}

func nsText(ns string) string {
	if ns == "" {
		return "any namespace"
	}
	return fmt.Sprintf("namespace %q", ns)
}

// unschedulableWhy says, for each injected pod the scheduler could not place, which nodes fail
// its required node selection and what they lack (nodefit), the Nodes read once and as metadata
// (a Node's status is large, and its labels and the agent's report are all this needs). Pods
// placed or going away cost nothing.
func unschedulableWhy(ctx context.Context, c client.Client, pods []*corev1.Pod) (map[podKey]string, error) {
	var pending []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil && p.Annotations[fsv1.StatusAnnotation] != "" &&
			slices.ContainsFunc(p.Status.Conditions, nodefit.Unschedulable) {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return nil, nil
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := c.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("list the nodes to say why %d pod(s) cannot be scheduled: %w", len(pending), err)
	}
	out := map[podKey]string{}
	for _, p := range pending {
		failing, _ := nodefit.Failures(&p.Spec, nodes.Items)
		if s := nodefit.Summary(failing); s != "" {
			out[podKey{p.Namespace, p.Name}] = s
		}
	}
	return out, nil
}
