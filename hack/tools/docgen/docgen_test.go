package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The repository root, from this package's directory.
const root = "../../.."

// TestCommittedReferencesAreCurrent: what is committed is what the generator writes from the
// committed sources (make verify checks the same by regenerating; this fails in make test-unit,
// with the command to run).
func TestCommittedReferencesAreCurrent(t *testing.T) {
	const crd = "config/crd/bases/kubefstack.io_stackinstances.yaml"
	src := read(t, crd)
	want, err := crdRef(src, crd)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, "docs/reference/stackinstance.md"); string(got) != string(want) {
		t.Errorf("docs/reference/stackinstance.md is not what the CRD generates: run make generate")
	}
	if got := read(t, "docs/reference/pod-contract.md"); string(got) != string(podContractRef(podcontract.Keys())) {
		t.Errorf("docs/reference/pod-contract.md is not what podcontract.Keys generates: run make generate")
	}

	table, err := valuesTable(read(t, "charts/kube-fstack/values.schema.json"), read(t, "charts/kube-fstack/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme := read(t, "charts/kube-fstack/README.md")
	regen, err := replaceBetween(readme, table)
	if err != nil {
		t.Fatal(err)
	}
	if string(regen) != string(readme) {
		t.Errorf("charts/kube-fstack/README.md's values table is not what the schema generates: run make generate")
	}
}

// TestCRDRefShowsEveryCheck: a field's type, default, bounds, enum, pattern, required, list keys
// and CEL messages all reach its row, and a pipe in a pattern cannot split the table.
func TestCRDRefShowsEveryCheck(t *testing.T) {
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.io
spec:
  group: example.io
  names: {kind: Thing, plural: things, listKind: ThingList, singular: thing}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [mode]
            x-kubernetes-validations:
            - rule: self.count < 10 || self.mode == 'a'
              message: count of 10 or more needs mode a
            properties:
              count:
                type: integer
                format: int32
                minimum: 1
                maximum: 255
                default: 1
                description: |-
                  Count of things.

                  A <second> paragraph.
              mode:
                type: string
                enum: [a, b]
                pattern: ^(a|b)$
              items:
                type: array
                maxItems: 4
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string, maxLength: 63}
`
	out, err := crdRef([]byte(crd), "thing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## example.io/v1 (served, the storage version)",
		"- rule: count of 10 or more needs mode a",
		"| `spec.count` | integer (int32) | `1` | 1 to 255 | Count of things.<br><br>A &lt;second&gt; paragraph. |",
		"| `spec.mode` | string |  | required<br>one of `a`, `b`<br>matches `^(a\\|b)$` |  |",
		"| `spec.items` | []object |  | at most 4 items<br>a list keyed by `name` (no two items with the same key) |  |",
		"| `spec.items[].name` | string |  | required<br>at most 63 characters |  |",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("reference lacks %q; got:\n%s", want, out)
		}
	}
}

func TestCRDRefRefusesOtherYAML(t *testing.T) {
	if _, err := crdRef([]byte("apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n"), "cm.yaml"); err == nil {
		t.Fatal("a ConfigMap was taken for a CRD")
	}
}

// TestValuesTableNeedsDescriptions: a value the schema does not describe fails generation, naming
// the key, so no value reaches the README undocumented.
func TestValuesTableNeedsDescriptions(t *testing.T) {
	schema := `{"type": "object", "properties": {
	  "a": {"type": "object", "properties": {
	    "described": {"type": "integer", "minimum": 1, "description": "an | x"},
	    "bare": {"type": "string"}}}}}`
	_, err := valuesTable([]byte(schema), []byte("a: {described: 2, bare: x}\n"))
	if err == nil || !strings.Contains(err.Error(), "a.bare") {
		t.Fatalf("want an error naming a.bare, got %v", err)
	}
	schema = strings.Replace(schema, `"type": "string"}`, `"type": "string", "description": "b"}`, 1)
	table, err := valuesTable([]byte(schema), []byte("a: {described: 2, bare: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := "| `a.described` | integer, ≥ 1 | `2` | an \\| x |\n| `a.bare` | string | `x` | b |\n"
	if !strings.HasSuffix(string(table), want) {
		t.Errorf("table:\n%s\nwant it to end with:\n%s", table, want)
	}
}

func TestReplaceBetweenKeepsTheRest(t *testing.T) {
	readme := "# c\nbefore\n" + valuesBegin + "\nold\n" + valuesEnd + "\nafter\n"
	got, err := replaceBetween([]byte(readme), []byte("new\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "# c\nbefore\n" + valuesBegin + "\nnew\n" + valuesEnd + "\nafter\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := replaceBetween([]byte("# no markers\n"), []byte("x")); err == nil {
		t.Error("a README without markers was accepted")
	}
}

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
