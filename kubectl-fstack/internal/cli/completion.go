package cli

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// CompletionName is the executable name kubectl (1.26 and later) runs to complete
// `kubectl fstack ...`: kubectl_complete-<plugin> on PATH, called with the words typed after
// "kubectl fstack". A link of that name to kubectl-fstack answers as cobra's __complete.
const CompletionName = "kubectl_complete-fstack"

// CompletionArgs turns the arguments of a run under CompletionName into cobra's __complete request.
func CompletionArgs(argv0 string, args []string) []string {
	base := argv0[strings.LastIndexAny(argv0, `/\`)+1:]
	if strings.TrimSuffix(base, ".exe") != CompletionName {
		return args
	}
	return append([]string{cobra.ShellCompRequestCmd}, args...)
}

// completeNames completes a command's one argument with names read from the cluster through
// the command's cluster flags; any failure completes nothing, as kubectl does.
func completeNames(c *clusterFlags, list func(context.Context, client.Client, string) []string) cobra.CompletionFunc {
	return completeNamesUpTo(c, list, 1)
}

// completeNamesUpTo completes up to most arguments (0: any number) with names read from the
// cluster, but those already given.
func completeNamesUpTo(c *clusterFlags, list func(context.Context, client.Client, string) []string, most int) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if most > 0 && len(args) >= most {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cfg, ns, err := c.restConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cl, err := newClient(cfg)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range list(context.Background(), cl, ns) {
			if strings.HasPrefix(n, prefix) && !slices.Contains(args, n) {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func stackNames(ctx context.Context, c client.Client, ns string) []string {
	return listNames(ctx, c, &fsv1.StackInstanceList{}, client.InNamespace(ns))
}

// stackPodNames are the pods of the namespace that belong to a stack (labelled kubefstack.io/stack).
func stackPodNames(ctx context.Context, c client.Client, ns string) []string {
	return listNames(ctx, c, &corev1.PodList{}, client.InNamespace(ns), client.HasLabels{fsv1.StackLabel})
}

func nodeNames(ctx context.Context, c client.Client, _ string) []string {
	return listNames(ctx, c, &corev1.NodeList{})
}

func namespaceNames(ctx context.Context, c client.Client, _ string) []string {
	return listNames(ctx, c, &corev1.NamespaceList{})
}

// listNames lists l and returns its items' names; a failed list completes nothing.
func listNames(ctx context.Context, c client.Client, l client.ObjectList, opts ...client.ListOption) []string {
	if c.List(ctx, l, opts...) != nil {
		return nil
	}
	var out []string
	_ = meta.EachListItem(l, func(o runtime.Object) error {
		if m, err := meta.Accessor(o); err == nil {
			out = append(out, m.GetName())
		}
		return nil
	})
	return out
}

// completeNamespaceFlag completes -n with the cluster's namespaces.
func completeNamespaceFlag(cmd *cobra.Command, c *clusterFlags) {
	_ = cmd.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return completeNames(c, namespaceNames)(cmd, nil, prefix)
	})
}
