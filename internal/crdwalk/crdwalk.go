// Package crdwalk applies the StackInstance CRD's static defaults and checks its OpenAPI bounds
// (types, required, enum, minimum/maximum, length, items, properties, pattern, list sets and map
// keys) by walking the generated CRD's schema, without kube-apiserver's libraries: the renderer
// and the dataplane's supervisor link it, and those libraries would cost the supervisor's binary
// a third to a half again (hack/bench-supervisor-size.sh). The bounds come from the CRD alone: no
// Go table repeats a marker. The CRD's CEL rules are not evaluated here: they relate fields to
// each other, and the renderer holds their twins (internal/render/rules.go;
// TestRendererEnforcesEveryCELRule holds them to the CRD). Paths are the API server's; messages say what to change, close to the API server's words
// (package crdschema, which the kubectl plugin runs, gives its exact words).
package crdwalk

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/config"
)

// Schema is the StackInstance CRD's schema of spec, with its patterns compiled.
type Schema struct {
	spec     *props
	patterns map[string]*regexp.Regexp
}

// Load returns the embedded CRD's spec schema, prepared once. An error means the embedded CRD
// is broken: a build that skipped `make generate`.
var Load = sync.OnceValues(load)

// props is the part of an OpenAPI schema node the API server's defaulting and validation
// read, as the generated CRD spells it. Decoding into this rather than apiextensions' own type
// keeps that package (and its protobuf code) out of the supervisor's binary.
type props struct {
	Type                 string            `json:"type"`
	Properties           map[string]*props `json:"properties"`
	Items                *props            `json:"items"`
	AdditionalProperties *props            `json:"additionalProperties"`
	Required             []string          `json:"required"`
	Enum                 []json.RawMessage `json:"enum"`
	Default              json.RawMessage   `json:"default"`
	Minimum              *float64          `json:"minimum"`
	Maximum              *float64          `json:"maximum"`
	ExclusiveMinimum     bool              `json:"exclusiveMinimum"`
	ExclusiveMaximum     bool              `json:"exclusiveMaximum"`
	MinLength            *int64            `json:"minLength"`
	MaxLength            *int64            `json:"maxLength"`
	Pattern              string            `json:"pattern"`
	MinItems             *int64            `json:"minItems"`
	MaxItems             *int64            `json:"maxItems"`
	MinProperties        *int64            `json:"minProperties"`
	MaxProperties        *int64            `json:"maxProperties"`
	ListType             string            `json:"x-kubernetes-list-type"`
	ListMapKeys          []string          `json:"x-kubernetes-list-map-keys"`
}

// crd is the path in the generated CRD to the schema of spec.
type crd struct {
	Spec struct {
		Versions []struct {
			Schema struct {
				OpenAPIV3Schema struct {
					Properties struct {
						Spec *props `json:"spec"`
					} `json:"properties"`
				} `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

func load() (*Schema, error) {
	raw, err := config.CRDs.ReadFile(config.StackInstanceCRDFile)
	if err != nil {
		return nil, err
	}
	var c crd
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", config.StackInstanceCRDFile, err)
	}
	if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec == nil {
		return nil, fmt.Errorf("%s: want one version with a schema of spec (run make generate)", config.StackInstanceCRDFile)
	}
	spec := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec
	s := &Schema{spec: spec, patterns: map[string]*regexp.Regexp{}}
	if err := s.compile(spec); err != nil {
		return nil, fmt.Errorf("%s: %w", config.StackInstanceCRDFile, err)
	}
	return s, nil
}

func (s *Schema) compile(p *props) error {
	if p.Pattern != "" && s.patterns[p.Pattern] == nil {
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			return err
		}
		s.patterns[p.Pattern] = re
	}
	for _, c := range children(p) {
		if err := s.compile(c); err != nil {
			return err
		}
	}
	return nil
}

func children(p *props) []*props {
	var out []*props
	for _, k := range slices.Sorted(maps.Keys(p.Properties)) {
		out = append(out, p.Properties[k])
	}
	if p.Items != nil {
		out = append(out, p.Items)
	}
	if p.AdditionalProperties != nil {
		out = append(out, p.AdditionalProperties)
	}
	return out
}

// Default applies the schema's defaults to spec (JSON as encoding/json decodes it) in place, as
// the API server does on create: a property with a default is set where its object exists and
// the property is absent.
func (s *Schema) Default(spec map[string]any) { defaultNode(s.spec, spec) }

func defaultNode(p *props, v any) {
	switch v := v.(type) {
	case map[string]any:
		// Each property's default is its own: the order they are applied in does not matter.
		for k, c := range p.Properties {
			// null is absent: the API server prunes it from a field that is not nullable
			// (none of the CRD's is) before it defaults.
			if v[k] == nil && len(c.Default) > 0 {
				var d any
				if json.Unmarshal(c.Default, &d) == nil {
					v[k] = d
				}
			}
			if cv := v[k]; cv != nil {
				defaultNode(c, cv)
			}
		}
		if p.AdditionalProperties != nil {
			for k, cv := range v {
				if _, known := p.Properties[k]; !known {
					defaultNode(p.AdditionalProperties, cv)
				}
			}
		}
	case []any:
		if p.Items != nil {
			for _, item := range v {
				defaultNode(p.Items, item)
			}
		}
	}
}

// Validate checks spec (JSON as encoding/json decodes it, defaults applied) against every
// OpenAPI bound of the schema and returns each violation at its path under "spec". Properties
// the schema does not know are left alone, as the supervisor's decoder leaves them.
func (s *Schema) Validate(spec map[string]any) field.ErrorList {
	w := &walk{s: s}
	w.node(s.spec, spec, field.NewPath("spec"))
	return w.errs
}

type walk struct {
	s    *Schema
	errs field.ErrorList
}

func (w *walk) add(e *field.Error) { w.errs = append(w.errs, e) }

func (w *walk) node(p *props, v any, path *field.Path) {
	if v == nil {
		return // null: the typed decoder has already dropped it
	}
	if !w.typeOK(p, v, path) {
		return
	}
	w.enum(p, v, path)
	switch v := v.(type) {
	case map[string]any:
		w.object(p, v, path)
	case []any:
		w.list(p, v, path)
	case string:
		w.str(p, v, path)
	case float64:
		w.number(p, v, path)
	}
}

func (w *walk) typeOK(p *props, v any, path *field.Path) bool {
	var ok bool
	switch p.Type {
	case "":
		return true // x-kubernetes-int-or-string (quantities) and untyped nodes
	case "object":
		_, ok = v.(map[string]any)
	case "array":
		_, ok = v.([]any)
	case "string":
		_, ok = v.(string)
	case "boolean":
		_, ok = v.(bool)
	case "number":
		_, ok = v.(float64)
	case "integer":
		f, isNum := v.(float64)
		ok = isNum && f == float64(int64(f))
	}
	if !ok {
		w.add(field.Invalid(path, shortenAny(v), "must be of type "+p.Type))
	}
	return ok
}

func (w *walk) enum(p *props, v any, path *field.Path) {
	if len(p.Enum) == 0 {
		return
	}
	allowed := make([]string, 0, len(p.Enum))
	for _, e := range p.Enum {
		var ev any
		if json.Unmarshal(e, &ev) == nil && ev == v {
			return
		}
		allowed = append(allowed, strings.Trim(string(e), `"`))
	}
	w.add(field.NotSupported(path, shortenAny(v), allowed))
}

func (w *walk) object(p *props, v map[string]any, path *field.Path) {
	for _, r := range p.Required {
		if v[r] == nil { // absent or null, which Go writes for a required list left empty
			w.add(field.Required(path.Child(r), ""))
		}
	}
	if p.MaxProperties != nil && int64(len(v)) > *p.MaxProperties {
		w.add(field.TooMany(path, len(v), int(*p.MaxProperties)))
	}
	if p.MinProperties != nil && int64(len(v)) < *p.MinProperties {
		w.add(field.Invalid(path, len(v), fmt.Sprintf("must have at least %d properties", *p.MinProperties)))
	}
	for _, k := range slices.Sorted(maps.Keys(v)) {
		if c, known := p.Properties[k]; known {
			w.node(c, v[k], path.Child(k))
		} else if p.AdditionalProperties != nil {
			w.node(p.AdditionalProperties, v[k], path.Key(shorten(k)))
		}
	}
}

func (w *walk) list(p *props, v []any, path *field.Path) {
	if p.MaxItems != nil && int64(len(v)) > *p.MaxItems {
		// Past the bound nothing else is looked at: the items are not worth walking.
		w.add(field.TooMany(path, len(v), int(*p.MaxItems)))
		return
	}
	if p.MinItems != nil && int64(len(v)) < *p.MinItems {
		w.add(field.Invalid(path, len(v), fmt.Sprintf("must have at least %d item(s)", *p.MinItems)))
	}
	if p.Items != nil {
		for i, item := range v {
			w.node(p.Items, item, path.Index(i))
		}
	}
	switch p.ListType {
	case "set":
		w.unique(v, path, canonical)
	case "map":
		w.unique(v, path, func(item any) (string, bool) {
			m, ok := item.(map[string]any)
			if !ok {
				return "", false
			}
			key := make([]any, len(p.ListMapKeys))
			for i, k := range p.ListMapKeys {
				key[i] = m[k]
			}
			return canonical(key)
		})
	}
}

// unique reports every item whose key equals an earlier item's (a set's values, a map's keys).
func (w *walk) unique(v []any, path *field.Path, key func(any) (string, bool)) {
	seen := make(map[string]bool, len(v))
	for i, item := range v {
		k, ok := key(item)
		if !ok {
			continue
		}
		if seen[k] {
			w.add(field.Duplicate(path.Index(i), shortenAny(item)))
		}
		seen[k] = true
	}
}

func canonical(v any) (string, bool) {
	b, err := json.Marshal(v)
	return string(b), err == nil
}

func (w *walk) str(p *props, v string, path *field.Path) {
	n := int64(utf8.RuneCountInString(v))
	if p.MaxLength != nil && n > *p.MaxLength {
		w.add(field.TooLong(path, "", int(*p.MaxLength)))
		return
	}
	if p.MinLength != nil && n < *p.MinLength {
		w.add(field.Invalid(path, shorten(v), fmt.Sprintf("must be at least %d characters long", *p.MinLength)))
	}
	if re := w.s.patterns[p.Pattern]; re != nil && !re.MatchString(v) {
		w.add(field.Invalid(path, shorten(v), "must match '"+p.Pattern+"'"))
	}
}

func (w *walk) number(p *props, v float64, path *field.Path) {
	if m := p.Minimum; m != nil && (v < *m || (p.ExclusiveMinimum && v == *m)) {
		w.add(field.Invalid(path, shortenAny(v), fmt.Sprintf("must be greater than %s%v", orEqual(!p.ExclusiveMinimum), *m)))
	}
	if m := p.Maximum; m != nil && (v > *m || (p.ExclusiveMaximum && v == *m)) {
		w.add(field.Invalid(path, shortenAny(v), fmt.Sprintf("must be less than %s%v", orEqual(!p.ExclusiveMaximum), *m)))
	}
}

func orEqual(b bool) string {
	if b {
		return "or equal to "
	}
	return ""
}

// shorten keeps a hostile value from filling the error message (and the log it lands in).
func shorten(v string) string {
	const keep = 64
	if len(v) <= keep {
		return v
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(v[:keep], ""), len(v))
}

func shortenAny(v any) any {
	switch v := v.(type) {
	case string:
		return shorten(v)
	case float64:
		if v == float64(int64(v)) {
			return int64(v)
		}
		return v
	case map[string]any, []any:
		return fmt.Sprintf("(%T)", v)
	}
	return v
}
