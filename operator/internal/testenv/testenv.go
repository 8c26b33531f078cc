// Package testenv describes the API server the operator's envtest suite and benchmark run
// against: kube-apiserver and etcd from KUBEBUILDER_ASSETS (hack/envtest-assets.sh), with the
// project's CRDs and webhook configurations installed.
package testenv

import (
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Environment returns the envtest environment for the repository at root.
func Environment(root string) *envtest.Environment {
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}},
	}
}
