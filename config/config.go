// Package config embeds the manifests of this folder that tests read, so that no test reaches
// them by a relative path: the samples a user applies and the CRD `make generate` writes.
// internal/test/fixtures decodes them; no binary imports this package.
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
