// Package config embeds the manifests of this folder that code reads, so that nothing reaches
// them by a relative path: the samples a user applies (tests only) and the CRD `make generate`
// writes, which is the one source of the StackInstance's defaults and bounds (package crdschema
// in the kubectl plugin, package crdwalk in the renderer and the dataplane).
package config

import "embed"

// Samples is config/samples (paths "samples/..."): the StackInstances and workloads the README
// and the user guide (docs/) tell a user to apply.
//
//go:embed samples
var Samples embed.FS

// CRDs is config/crd/bases (paths "crd/bases/..."), as controller-gen generates it.
//
//go:embed crd/bases/*.yaml
var CRDs embed.FS

// StackInstanceCRDFile is the StackInstance CRD in CRDs.
const StackInstanceCRDFile = "crd/bases/kubefstack.io_stackinstances.yaml"
