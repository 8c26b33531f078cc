package cli

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// clusterFlags reach the cluster as kubectl does, through cli-runtime's ConfigFlags (the flags
// every kubectl plugin shares): the kubeconfig from --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config; --context, -n, --server, --token, --as and the rest override it. The commands
// that read the cluster (status, doctor, version) share them, so they behave alike.
type clusterFlags struct {
	config *genericclioptions.ConfigFlags
}

// add registers the flags.
func (c *clusterFlags) add(f *pflag.FlagSet) {
	c.config = genericclioptions.NewConfigFlags(false)
	// kubectl waits forever by default; a status view should not hang on a dead API server.
	c.config.Timeout = ptr.To("30s")
	c.config.AddFlags(f)
}

// restConfig loads the kubeconfig and returns the client configuration with the namespace the
// context (or -n) names.
func (c *clusterFlags) restConfig() (*rest.Config, string, error) {
	ns, _, err := c.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := c.config.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w (use --kubeconfig, $KUBECONFIG or ~/.kube/config, as for kubectl)", err)
	}
	return cfg, ns, nil
}

// namespaceGiven reports whether -n was given (the context's namespace alone does not count).
func (c *clusterFlags) namespaceGiven(f *pflag.FlagSet) bool {
	return f.Changed("namespace")
}
