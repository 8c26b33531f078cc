// Package config embeds the manifests of this folder that code reads, so that nothing reaches
// them by a relative path: the samples a user applies (tests only) and the CRD `make generate`
// writes, which is the one source of the StackInstance's defaults and bounds (package crdschema
// in the kubectl plugin, package crdwalk in the renderer and the dataplane).
package config

import (
	"embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Samples is config/samples (paths "samples/..."): the StackInstances and workloads the README
// tells a user to apply.
//
//go:embed samples
var Samples embed.FS

// CRDs is config/crd/bases (paths "crd/bases/..."), as controller-gen generates it.
//
//go:embed crd/bases/*.yaml
var CRDs embed.FS

// StackInstanceCRDFile is the StackInstance CRD in CRDs.
const StackInstanceCRDFile = "crd/bases/kubefstack.io_stackinstances.yaml"

// StackInstanceCRD decodes the generated StackInstance CRD. It fails only on a tree whose CRD
// `make generate` did not write.
func StackInstanceCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	raw, err := CRDs.ReadFile(StackInstanceCRDFile)
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return nil, fmt.Errorf("%s: %v", StackInstanceCRDFile, err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil || crd.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("%s: want one version with an OpenAPI schema (run make generate)", StackInstanceCRDFile)
	}
	return &crd, nil
}
