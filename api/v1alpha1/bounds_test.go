package v1alpha1_test

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/config"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The limits a reader of what a pod writes enforces live in internal/podcontract (the node's
// binaries link it, and it imports no Kubernetes library), while the CRD states them as markers,
// which cannot name a Go constant: the generated CRD must say the same numbers.
func TestBoundsAreTheCRDs(t *testing.T) {
	raw, err := config.CRDs.ReadFile(config.StackInstanceCRDFile)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("the CRD has %d versions, want 1", len(crd.Spec.Versions))
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	ports := spec.Properties["ports"]
	if ports.Items == nil {
		t.Fatal("the CRD's spec.ports has no items schema")
	}
	for _, b := range []struct {
		field     string
		crd       *int64
		constant  int
		constName string
	}{
		{"spec.processes maximum", spec.Properties["processes"].Maximum, podcontract.MaxInstances, "podcontract.MaxInstances"},
		{"spec.ports[].processes maxItems", ports.Items.Properties["processes"].MaxItems, podcontract.MaxInstances, "podcontract.MaxInstances"},
		{"spec.ports maxItems", ports.MaxItems, podcontract.MaxPorts, "podcontract.MaxPorts"},
		{"spec.ports[].name maxLength", ports.Items.Properties["name"].MaxLength, podcontract.MaxPortName, "podcontract.MaxPortName"},
	} {
		if b.crd == nil || *b.crd != int64(b.constant) {
			t.Errorf("the CRD's %s is %v, %s is %d: change both (the marker in api/v1alpha1, then make generate)",
				b.field, deref(b.crd), b.constName, b.constant)
		}
	}
}

// schema is the part of an OpenAPI schema the bounds are read from.
type schema struct {
	Properties map[string]schema `json:"properties"`
	Items      *schema           `json:"items"`
	Maximum    *int64            `json:"maximum"`
	MaxItems   *int64            `json:"maxItems"`
	MaxLength  *int64            `json:"maxLength"`
}

func deref(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}
