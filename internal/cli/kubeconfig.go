package cli

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterFlags reach the cluster as kubectl does: the kubeconfig from --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config; --context and -n override its current context. The commands
// that read the cluster (status, doctor) share them, so they behave alike.
type clusterFlags struct {
	kubeconfig, context, namespace string
	timeout                        time.Duration
}

// add registers the flags; withNamespace adds -n for commands that look in one namespace.
func (c *clusterFlags) add(f *pflag.FlagSet, withNamespace bool) {
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&c.context, "context", "", "the kubeconfig context to use")
	if withNamespace {
		f.StringVarP(&c.namespace, "namespace", "n", "", "the namespace (default: the context's)")
	}
	f.DurationVar(&c.timeout, "request-timeout", 30*time.Second, "how long to wait for the API server")
}

// restConfig loads the kubeconfig and returns the client configuration with the namespace the
// context (or -n) names.
func (c *clusterFlags) restConfig() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context}
	overrides.Context.Namespace = c.namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w (use --kubeconfig, $KUBECONFIG or ~/.kube/config, as for kubectl)", err)
	}
	cfg.Timeout = c.timeout
	return cfg, ns, nil
}
