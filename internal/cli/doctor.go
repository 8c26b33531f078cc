package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

type doctorOptions struct {
	clusterFlags
}

func newDoctorCommand(stdout io.Writer) *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor [NODE]",
		Short: "Print each node's kube-fstack report (the node agent's checks) and what to do about each failed check",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return o.run(stdout, args)
		},
	}
	o.add(cmd.Flags(), false)
	return cmd
}

func (o *doctorOptions) run(stdout io.Writer, args []string) error {
	cfg, _, err := o.restConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var nodes []corev1.Node
	if len(args) == 1 {
		n, err := cs.CoreV1().Nodes().Get(ctx, args[0], metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", args[0], err)
		}
		nodes = []corev1.Node{*n}
	} else {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		nodes = list.Items
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for i := range nodes {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printNodeReport(stdout, &nodes[i])
	}
	return nil
}

// printNodeReport prints one node: its kube-fstack labels, every check, and a fix line for each
// check that did not pass. Every string of the node (the report above all: the node agent writes it, and so can anyone
// who controls the node or may edit nodes) goes through safe before it is printed.
func printNodeReport(w io.Writer, n *corev1.Node) {
	name := safe(n.Name)
	raw, ok := n.Annotations[fsv1.NodeReportAnnotation]
	if !ok {
		fmt.Fprintf(w, "node %s: no report: the kube-fstack node agent has not run there (chart value cni.nodeAgent.enabled; the CNI DaemonSet's nodeSelector and tolerations; its node-agent container's log)\n", name)
		return
	}
	r, err := nodecheck.ParseReport(raw)
	if err != nil {
		// JSON's errors quote the offending bytes.
		fmt.Fprintf(w, "node %s: unreadable report: %s\n", name, safe(err.Error()))
		return
	}
	failed := r.Failed()
	fmt.Fprintf(w, "node %s: %d of %d checks need attention\n", name, len(failed), len(r.Checks))
	fmt.Fprintf(w, "  labels: %s\n", safe(nodeLabels(n)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", safe(strings.ToUpper(string(c.Status))), safe(c.Name), safe(c.Detail))
	}
	_ = tw.Flush()
	for _, c := range failed {
		if c.Fix != "" {
			fmt.Fprintf(w, "  fix %s: %s: %s\n", safe(c.Name), safe(c.Detail), safe(c.Fix))
		}
	}
}

// nodeLabels are the node's node.kubefstack.io/ labels as the scheduler sees them (which may
// lag the report only between the agent's patch and the next read).
func nodeLabels(n *corev1.Node) string {
	var out []string
	for k, v := range n.Labels {
		if strings.HasPrefix(k, fsv1.NodeLabelPrefix) {
			out = append(out, k+"="+v)
		}
	}
	if len(out) == 0 {
		return "(none)"
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
