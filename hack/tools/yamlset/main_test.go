package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const values = "../../../charts/kube-fstack/values.yaml"

// The edit make release makes of the chart's values.yaml: every line but the set keys' is the
// same byte for byte (so every comment `helm show values` shows), and those lines keep their
// key, indentation and quoting.
func TestReleaseEditChangesOnlyItsKeys(t *testing.T) {
	src, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	edits := map[string]string{
		"operator.image.repository":  "registry.example/kube-fstack/operator",
		"operator.image.digest":      "sha256:" + strings.Repeat("a", 64),
		"cni.image.repository":       "registry.example/kube-fstack/cni",
		"cni.image.digest":           "sha256:" + strings.Repeat("b", 64),
		"dataplane.image.repository": "registry.example/kube-fstack/dataplane",
	}
	var list []edit
	for k, v := range edits {
		list = append(list, edit{path: k, value: v})
	}
	out, err := set(src, list)
	if err != nil {
		t.Fatal(err)
	}
	before, after := strings.Split(string(src), "\n"), strings.Split(string(out), "\n")
	if len(before) != len(after) {
		t.Fatalf("%d lines became %d", len(before), len(after))
	}
	changed := map[string]string{}
	comments := 0
	for i := range before {
		if strings.HasPrefix(strings.TrimSpace(before[i]), "#") {
			comments++
		}
		if before[i] == after[i] {
			continue
		}
		key, _, _ := strings.Cut(before[i], ":")
		gotKey, got, _ := strings.Cut(after[i], ": ")
		if key != gotKey {
			t.Errorf("line %d: %q became %q: the key or its indentation changed", i+1, before[i], after[i])
		}
		changed[strings.TrimSpace(key)+" "+got] = before[i]
	}
	if comments < 50 {
		t.Fatalf("values.yaml has %d comment lines; the test expects the chart's commented values", comments)
	}
	want := []string{
		"repository registry.example/kube-fstack/operator", `digest "sha256:` + strings.Repeat("a", 64) + `"`,
		"repository registry.example/kube-fstack/cni", `digest "sha256:` + strings.Repeat("b", 64) + `"`,
		"repository registry.example/kube-fstack/dataplane",
	}
	for _, w := range want {
		if _, ok := changed[w]; !ok {
			t.Errorf("no line became %q; changed: %q", w, changed)
		}
	}
	if len(changed) != len(want) {
		t.Errorf("%d lines changed, want %d: %q", len(changed), len(want), changed)
	}
}

func TestSetKeepsStyleAndComments(t *testing.T) {
	for name, tc := range map[string]struct{ src, path, value, want string }{
		"plain with a comment":                   {"a:\n  b: old # why\n", "a.b", "new", "a:\n  b: new # why\n"},
		"double quoted":                          {"a:\n  b: \"\"   # why\n", "a.b", "x", "a:\n  b: \"x\"   # why\n"},
		"single quoted":                          {"a: 'it''s'\n", "a", "yes it is", "a: 'yes it is'\n"},
		"a value that reads as a bool is quoted": {"a: old\n", "a", "true", "a: \"true\"\n"},
		"an empty value":                         {"a: old\n", "a", "", "a: \"\"\n"},
		"after a multi-byte character":           {"é: {x: 1}\nb:\n  c: old\n", "b.c", "new", "é: {x: 1}\nb:\n  c: new\n"},
		"a hash inside quotes":                   {"a: \"x #y\" # z\n", "a", "w", "a: \"w\" # z\n"},
	} {
		got, err := set([]byte(tc.src), []edit{{path: tc.path, value: tc.value}})
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, tc.want)
		}
	}
}

func TestSetRefusesWhatItCannotEditInPlace(t *testing.T) {
	for name, tc := range map[string]struct{ src, path, want string }{
		"missing key":        {"a:\n  b: 1\n", "a.c", `has no key "c"`},
		"not a scalar":       {"a:\n  b: 1\n", "a", "not a scalar"},
		"through a scalar":   {"a: 1\n", "a.b", "not a mapping"},
		"flow mapping":       {"a: {b: 1}\n", "a.b", "flow mapping"},
		"block scalar":       {"a: |\n  text\n", "a", "block scalar"},
		"alias":              {"x: &v 1\na: *v\n", "a", "anchor or alias"},
		"multi-line plain":   {"a: one\n  two\nb: 1\n", "a", "changed more than"},
		"multi-line quoted":  {"a: \"one\n  two\"\n", "a", "does not end on its line"},
		"set twice":          {"a: 1\n", "a", "set twice"},
		"explicitly tagged":  {"a: !!str 1\n", "a", "explicit tag"},
		"two YAML documents": {"a: 1\n---\nb: 2\n", "a", "want one YAML document"},
	} {
		edits := []edit{{path: tc.path, value: "v"}}
		if name == "set twice" {
			edits = append(edits, edit{path: tc.path, value: "w"})
		}
		got, err := set([]byte(tc.src), edits)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %q, %v; want an error saying %q", name, got, err, tc.want)
		}
	}
}

// run writes the file only when every edit holds, and keeps its mode.
func TestRunWritesInPlace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte("# top\na:\n  b: old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{p, "a.b=new", "a.missing=x"}); err == nil {
		t.Fatal("an edit of a missing key passed")
	}
	if b, _ := os.ReadFile(p); string(b) != "# top\na:\n  b: old\n" {
		t.Fatalf("a failed run wrote %q", b)
	}
	if err := run([]string{p, "a.b=new"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	var v struct{ A struct{ B string } }
	if err := yaml.Unmarshal(b, &v); err != nil || v.A.B != "new" || !strings.HasPrefix(string(b), "# top\n") {
		t.Errorf("after run: %q (%v)", b, err)
	}
	if info, _ := os.Stat(p); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 kept", info.Mode().Perm())
	}
}
