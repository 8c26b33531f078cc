package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest (v1alpha2) that the tests hold.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
			Bin string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

var sha256Placeholder = regexp.MustCompile(`^(SHA256_(LINUX|DARWIN)_(AMD64|ARM64)|[0-9a-f]{64})$`)

// The krew manifest parses (strictly: a misspelt key fails), names the plugin kubectl finds as
// `kubectl fstack`, and for each platform installs the binary `make build` produces: go build
// names it after this package's directory, and the Makefile's build target builds this package.
func TestKrewManifest(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	data, err := os.ReadFile(filepath.Join(root, "kubectl-fstack", "krew", "fstack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatalf("kubectl-fstack/krew/fstack.yaml: %v", err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "fstack" ||
		p.Spec.ShortDescription == "" || len(p.Spec.ShortDescription) > 80 || p.Spec.Version == "" || p.Spec.Homepage == "" {
		t.Fatalf("manifest header %+v", p)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Base(wd)
	if bin != "kubectl-"+p.Metadata.Name {
		t.Fatalf("plugin %q but the binary is %q: kubectl finds `kubectl %s` only as kubectl-%s", p.Metadata.Name, bin, p.Metadata.Name, p.Metadata.Name)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^build:.*\n(\t.*\n)*?\t.* build -o \$\(LOCALBIN\)/ .*\./kubectl-fstack/cmd/` + bin + `\b`).Match(makefile) {
		t.Fatalf("the Makefile's build target does not build ./kubectl-fstack/cmd/%s into $(LOCALBIN)/", bin)
	}
	seen := map[string]bool{}
	for i, pl := range p.Spec.Platforms {
		goos, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		seen[goos+"/"+arch] = true
		// The binary and its LICENSE (krew-index asks every plugin to install its license; the
		// archive also carries NOTICE and THIRD_PARTY_NOTICES, hack/krew-release.sh).
		if pl.Bin != bin || len(pl.Files) != 2 || pl.Files[0].From != bin || pl.Files[0].To != "." ||
			pl.Files[1].From != "LICENSE" || pl.Files[1].To != "." {
			t.Errorf("platforms[%d]: bin %q files %+v; want %s and LICENSE", i, pl.Bin, pl.Files, bin)
		}
		if !strings.HasSuffix(pl.URI, "_"+goos+"_"+arch+".tar.gz") || !sha256Placeholder.MatchString(pl.SHA256) {
			t.Errorf("platforms[%d]: uri %q sha256 %q", i, pl.URI, pl.SHA256)
		}
	}
	if len(seen) != 4 || !seen["linux/amd64"] || !seen["linux/arm64"] || !seen["darwin/amd64"] || !seen["darwin/arm64"] {
		t.Errorf("platforms %v; want linux and darwin (macOS), each amd64 and arm64", seen)
	}
}
