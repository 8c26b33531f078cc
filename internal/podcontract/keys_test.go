package podcontract

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// The keys the API package owns are registered with the API's values.
func TestKeysOfTheAPIAreTheAPIs(t *testing.T) {
	for reg, api := range map[string]string{
		namespaceInjectionLabel: fsv1.InjectionLabel,
		podStackLabel:           fsv1.StackLabel,
		podInjectAnnotation:     fsv1.InjectAnnotation,
		podStatusAnnotation:     fsv1.StatusAnnotation,
		nodeReportAnnotation:    fsv1.NodeReportAnnotation,
		nodeLabelPattern:        fsv1.NodeLabelPrefix + "<check>",
	} {
		if reg != api {
			t.Errorf("the registry names %q where api/v1alpha1 says %q", reg, api)
		}
	}
}

// notKeys are strings of the key's shape that name something else.
var notKeys = map[string]string{
	"kubefstack.io/stack-service": "the operator's cache index of Services by stack, never on an object",
	"kube-fstack.io/flows/":       "the seed of a port's flow cookie, never a key",
	"kube-fstack.io/port/":        "the seed of a port's name, never a key",
}

var reKey = regexp.MustCompile(`^(node\.)?(kubefstack|kube-fstack)\.io/([a-z0-9][-a-z0-9]*/?)?$`)

// Every label or annotation key the product's code names is in the registry, which the
// reference (docs/reference/pod-contract.md) is generated from: a key added without a
// registry entry fails here, naming the file.
func TestEveryKeyTheCodeNamesIsRegistered(t *testing.T) {
	registered := map[string]bool{}
	for _, k := range Keys() {
		if k.Name == "" || k.Kind == "" || k.On == "" || k.Writer == "" || k.Readers == "" || k.Value == "" || k.Doc == "" {
			t.Errorf("registry entry %+v: every field must say something", k)
		}
		if registered[k.Name+"@"+k.On+"@"+string(k.Kind)] {
			t.Errorf("%s (%s on %s) is registered twice", k.Name, k.Kind, k.On)
		}
		registered[k.Name+"@"+k.On+"@"+string(k.Kind)] = true
		registered[k.Name] = true
		// A key with a placeholder (node.kubefstack.io/<check>) registers its prefix, which the
		// code names to build it.
		if i := strings.Index(k.Name, "<"); i > 0 {
			registered[k.Name[:i]] = true
		}
	}
	found := 0
	product := func(rel string, dir bool) bool {
		if dir {
			return rel != "e2e" && rel != filepath.Join("internal", "test")
		}
		return !strings.HasSuffix(rel, "_test.go")
	}
	eachStringLiteral(t, product, func(l stringLiteral) {
		if !reKey.MatchString(l.value) {
			return
		}
		found++
		if _, other := notKeys[l.value]; !other && !registered[l.value] {
			t.Errorf("%s:%d names the key %q, which is not in podcontract.Keys: register it (the reference is generated from the registry)", l.file, l.line, l.value)
		}
	})
	if found < 10 {
		t.Fatalf("found %d key literals in the tree; the walk did not read the code (run from internal/podcontract)", found)
	}
}
