package testenv

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Start starts env's etcd and kube-apiserver. On failure it stops them itself: Start fails after
// starting both when the API server refuses a CRD (a CEL rule over its cost budget), and they
// would outlive the test.
func Start(env *envtest.Environment) (*rest.Config, error) {
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("start envtest (KUBEBUILDER_ASSETS=%q): %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	return cfg, nil
}
