package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/config"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// bound is one number of the CRD that Go code also holds: a marker (maximum, minimum,
// maxItems, maxLength), a CEL rule's number, or a number the field's description states.
type bound struct {
	field     string // spec.ports[].name
	kind      string // maximum, minimum, maxItems, maxLength, rule, description
	constant  int
	constName string
	// text is what the rule or description says, %d the constant's place.
	text string
}

// The limits a reader of what a pod writes enforces live in internal/podcontract (the node's
// binaries link it, and it imports no Kubernetes library), the ones the renderer enforces again
// for specs no API server checked in internal/render, while the CRD states them as markers, which
// cannot name a Go constant: the generated CRD must say the same numbers.
func TestBoundsAreTheCRDs(t *testing.T) {
	spec := loadSpecSchema(t)
	bounds := []bound{
		{field: "spec.processes", kind: "maximum", constant: podcontract.MaxInstances, constName: "podcontract.MaxInstances"},
		{field: "spec.ports[].processes", kind: "maxItems", constant: podcontract.MaxInstances, constName: "podcontract.MaxInstances"},
		{field: "spec.ports", kind: "maxItems", constant: podcontract.MaxPorts, constName: "podcontract.MaxPorts"},
		{field: "spec.ports[].name", kind: "maxLength", constant: podcontract.MaxPortName, constName: "podcontract.MaxPortName"},
		{field: "spec.rssCheck.entries", kind: "maxItems", constant: render.MaxRSSEntries, constName: "render.MaxRSSEntries"},
		{field: "spec.rssCheck.entries[].remotePort", kind: "maximum", constant: render.MaxPort, constName: "render.MaxPort"},
		{field: "spec.pcap.directory", kind: "maxLength", constant: render.MaxPcapDirectory, constName: "render.MaxPcapDirectory"},
		{field: "spec.dataplane.hugePages.amount", kind: "rule", constant: render.MaxQuantity, constName: "render.MaxQuantity", text: "size(self) <= %d"},
		{field: "spec.dataplane.resources", kind: "rule", constant: render.MaxResources, constName: "render.MaxResources", text: "size(self.limits) <= %d"},
		{field: "spec.dataplane.resources", kind: "rule", constant: render.MaxResources, constName: "render.MaxResources", text: "size(self.claims) <= %d"},
		{field: "spec.dataplane.resources", kind: "rule", constant: render.MaxResourceName, constName: "render.MaxResourceName", text: "size(k) <= %d"},
		{field: "spec.dataplane.resources", kind: "rule", constant: render.MaxQuantity, constName: "render.MaxQuantity", text: "size(self.requests[k]) <= %d"},
		{field: "spec.dataplane.resources", kind: "rule", constant: render.MaxDNSLabel, constName: "render.MaxDNSLabel", text: "size(c.name) <= %d"},
		{field: "spec.freebsd.boot", kind: "rule", constant: render.MaxTunableName, constName: "render.MaxTunableName", text: "size(k) <= %d"},
		{field: "spec.freebsd.boot", kind: "rule", constant: render.MaxBootValue, constName: "render.MaxBootValue", text: "size(self[k]) <= %d"},
		{field: "spec.freebsd.sysctl", kind: "rule", constant: render.MaxTunableName, constName: "render.MaxTunableName", text: "size(k) <= %d"},
		{field: "spec.freebsd.sysctl", kind: "rule", constant: render.MaxSysctlValue, constName: "render.MaxSysctlValue", text: "size(self[k]) <= %d"},
	}
	for _, owner := range []string{"spec.ports[]", "spec.vlans[]"} {
		bounds = append(bounds,
			bound{field: owner + ".vips", kind: "maxItems", constant: render.MaxVIPs, constName: "render.MaxVIPs"},
			bound{field: owner + ".vips6", kind: "maxItems", constant: render.MaxVIPs, constName: "render.MaxVIPs"},
			bound{field: owner + ".ipv4", kind: "rule", constant: render.MaxPrefixLengthIPv4, constName: "render.MaxPrefixLengthIPv4",
				text: "self.pool.prefixLength <= %d"})
		for _, family := range []string{".ipv4", ".ipv6"} {
			pool := owner + family + ".pool"
			bounds = append(bounds,
				bound{field: pool + ".ranges", kind: "maxItems", constant: render.MaxPoolRanges, constName: "render.MaxPoolRanges"},
				bound{field: pool + ".ranges[]", kind: "maxLength", constant: render.MaxPoolRangeLength, constName: "render.MaxPoolRangeLength"},
				bound{field: pool + ".ranges", kind: "description", constant: render.MaxPoolSize, constName: "render.MaxPoolSize",
					text: "At most %d addresses"},
				bound{field: pool + ".prefixLength", kind: "minimum", constant: render.MinPrefixLength, constName: "render.MinPrefixLength"},
				bound{field: pool + ".prefixLength", kind: "maximum", constant: render.MaxPrefixLengthIPv6, constName: "render.MaxPrefixLengthIPv6"})
		}
	}
	for _, b := range bounds {
		if got, ok := spec.says(b); !ok {
			t.Errorf("the CRD's %s %s is %s, %s is %d: change both (the marker in api/v1alpha1, then make generate)",
				b.field, b.kind, got, b.constName, b.constant)
		}
	}
}

func loadSpecSchema(t *testing.T) schema {
	t.Helper()
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
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
}

// schema is the part of an OpenAPI schema the bounds are read from.
type schema struct {
	Properties  map[string]schema `json:"properties"`
	Items       *schema           `json:"items"`
	Maximum     *int64            `json:"maximum"`
	Minimum     *int64            `json:"minimum"`
	MaxItems    *int64            `json:"maxItems"`
	MaxLength   *int64            `json:"maxLength"`
	Description string            `json:"description"`
	Validations []struct {
		Rule string `json:"rule"`
	} `json:"x-kubernetes-validations"`
}

// at is the schema of path below spec (spec.ports[].name), or nil.
func (s *schema) at(path string) *schema {
	cur := s
	for _, part := range strings.Split(strings.TrimPrefix(path, "spec."), ".") {
		name, list := strings.CutSuffix(part, "[]")
		next, ok := cur.Properties[name]
		if !ok {
			return nil
		}
		cur = &next
		if list {
			if cur.Items == nil {
				return nil
			}
			cur = cur.Items
		}
	}
	return cur
}

// says reports whether the CRD states b's constant at b's field, and what it states otherwise.
func (s *schema) says(b bound) (string, bool) {
	f := s.at(b.field)
	if f == nil {
		return "not in the schema", false
	}
	number := func(p *int64) (string, bool) {
		if p == nil {
			return "unset", false
		}
		return fmt.Sprint(*p), *p == int64(b.constant)
	}
	want := fmt.Sprintf(b.text, b.constant)
	switch b.kind {
	case "maximum":
		return number(f.Maximum)
	case "minimum":
		return number(f.Minimum)
	case "maxItems":
		return number(f.MaxItems)
	case "maxLength":
		return number(f.MaxLength)
	case "description":
		return fmt.Sprintf("not %q in its description", want), strings.Contains(f.Description, want)
	}
	for _, v := range f.Validations {
		if strings.Contains(v.Rule, want) {
			return "", true
		}
	}
	return fmt.Sprintf("not %q in any CEL rule", want), false
}
