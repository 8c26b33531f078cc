// Package policies creates the admission policies docs/verifying-releases.md gives (Kyverno's
// ClusterPolicy, the sigstore policy-controller's ClusterImagePolicy) in a real kube-apiserver that
// has those projects' own CRDs, with strict field validation: a misspelt, moved or mistyped field
// fails here. The CRDs come from the projects' Go modules at the versions below (the module proxy
// serves them; `go mod download` caches them). Neither controller runs here: building Kyverno or the
// policy-controller takes longer than this tier may, so what the policies enforce is proven by
// cosign against a real registry in test/release, with the same flags they set.
package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// The versions whose CRDs the docs' policies are checked against (docs/verifying-releases.md says so).
const (
	kyverno          = "github.com/kyverno/kyverno@v1.19.1"
	policyController = "github.com/sigstore/policy-controller@v0.13.1"
)

// moduleDir downloads mod (path@version) into the module cache and returns its directory.
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir() // outside this module: nothing is added to go.mod
	cmd.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if err != nil || json.Unmarshal(out, &info) != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: %v %s\n%s%s (the Go module proxy must be reachable once; the module cache keeps it)", mod, err, info.Error, out, stderr.String())
	}
	return info.Dir
}

func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// policy-controller's file starts with its license header and "---".
	for _, doc := range strings.Split(string(b), "\n---") {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(doc), &crd); err == nil && crd.Kind == "CustomResourceDefinition" {
			return &crd
		}
	}
	t.Fatalf("%s holds no CustomResourceDefinition", path)
	return nil
}

// docPolicies are the YAML blocks of the page, by kind.
func docPolicies(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "verifying-releases.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*unstructured.Unstructured{}
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m[1]), &u.Object); err != nil {
			t.Fatalf("a yaml block of docs/verifying-releases.md does not parse: %v\n%s", err, m[1])
		}
		got[u.GetKind()] = u
	}
	for _, k := range []string{"ClusterPolicy", "ClusterImagePolicy"} {
		if got[k] == nil {
			t.Fatalf("docs/verifying-releases.md has no %s yaml block (kinds found: %v)", k, got)
		}
	}
	return got
}

func field(t *testing.T, u *unstructured.Unstructured, path string) any {
	t.Helper()
	var cur any = u.Object
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			if len(c) == 0 {
				return nil
			}
			cur = c[0].(map[string]any)[p] // the first entry of a list
		default:
			return nil
		}
	}
	return cur
}

func TestDocsPoliciesFitKyvernoAndPolicyControllerCRDs(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test-envtest`, which prepares kube-apiserver and etcd (hack/envtest-assets.sh)")
	}
	policies := docPolicies(t)
	cp := readCRD(t, filepath.Join(moduleDir(t, kyverno), "config", "crds", "kyverno", "kyverno.io_clusterpolicies.yaml"))
	cip := readCRD(t, filepath.Join(moduleDir(t, policyController), "config", "300-clusterimagepolicy.yaml"))
	// The policy-controller converts between its versions with its own webhook, which does not run
	// here; without conversion the API server still holds v1beta1 objects to v1beta1's schema.
	cip.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}

	env := &envtest.Environment{CRDs: []*apiextensionsv1.CustomResourceDefinition{cp, cip}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: runtime.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	strict := &client.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	ctx := context.Background()

	for kind, u := range policies {
		if err := c.Create(ctx, u.DeepCopy(), strict); err != nil {
			t.Errorf("the page's %s is refused by its CRD: %v", kind, err)
		}
	}

	// What makes them accept key-signed images with no transparency log, and check the SBOM.
	kp := policies["ClusterPolicy"]
	vi := "spec.rules.verifyImages."
	for path, want := range map[string]any{
		vi + "attestors.entries.keys.rekor.ignoreTlog":              true,
		vi + "attestors.entries.keys.ctlog.ignoreSCT":               true,
		vi + "attestations.attestors.entries.keys.rekor.ignoreTlog": true,
		vi + "attestations.attestors.entries.keys.ctlog.ignoreSCT":  true,
		vi + "attestations.type":                                    "https://spdx.dev/Document",
		vi + "failureAction":                                        "Enforce",
		vi + "required":                                             true,
	} {
		if got := field(t, kp, path); got != want {
			t.Errorf("ClusterPolicy %s = %v, want %v", path, got, want)
		}
	}
	ip := policies["ClusterImagePolicy"]
	if key, _ := field(t, ip, "spec.authorities.key.data").(string); !strings.Contains(key, "BEGIN PUBLIC KEY") {
		t.Errorf("ClusterImagePolicy's key authority has no public key in key.data: %q", key)
	}
	if got := field(t, ip, "spec.authorities.ctlog"); got != nil {
		t.Errorf("ClusterImagePolicy's authority names a ctlog (%v): the policy-controller would then look up the transparency log the release is not in", got)
	}
	if got := field(t, ip, "spec.authorities.attestations.predicateType"); got != "spdxjson" {
		t.Errorf("ClusterImagePolicy attestation predicateType = %v, want spdxjson (cosign attest --type spdxjson)", got)
	}

	// The check bites: a field in the wrong place, or a value the schema does not allow, is refused.
	for name, change := range map[string]func(vi map[string]any){
		"ignore-tlog-misplaced": func(vi map[string]any) { vi["ignoreTlog"] = true }, // belongs under keys.rekor
		"failure-action-deny":   func(vi map[string]any) { vi["failureAction"] = "Deny" },
	} {
		bad := kp.DeepCopy()
		bad.SetName(name)
		rules, _, _ := unstructured.NestedSlice(bad.Object, "spec", "rules")
		change(rules[0].(map[string]any)["verifyImages"].([]any)[0].(map[string]any))
		_ = unstructured.SetNestedSlice(bad.Object, rules, "spec", "rules")
		if err := c.Create(ctx, bad, strict); err == nil {
			t.Errorf("a ClusterPolicy changed so (%s) was accepted: the check proves nothing", name)
		}
	}
}
