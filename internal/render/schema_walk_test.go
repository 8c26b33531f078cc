package render_test

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The walker turns every bound of the generated CRD's schema into cases: a value just past the
// bound and one at it, applied to a fully populated spec that the API server accepts.

// seg is one step into the spec object: a property name (string) or a list index (int).
type seg any

// schemaCase is one mutation of the base spec.
type schemaCase struct {
	rule   string // "<schema path> <constraint>", the coverage key
	path   []seg  // where the value is set (or deleted)
	value  any
	delete bool
	extra  func(spec map[string]any) // a fix-up elsewhere in the spec, or nil
}

// fieldPath is the path as field.Path prints it.
func (c *schemaCase) fieldPath() string {
	var b strings.Builder
	b.WriteString("spec")
	for _, s := range c.path {
		switch v := s.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", v)
		case string:
			// A map key as the API server's schema validator prints it.
			b.WriteString("." + strings.Trim(v, "[]"))
		}
	}
	return b.String()
}

type walker struct {
	cases []schemaCase
	seen  map[string]bool // rule and value: list items repeat each bound once per item
	// rules are every constraint seen, by coverage key; cel the CEL rules by schema path.
	rules map[string]bool
	cel   map[string][]string
}

func newWalker() *walker {
	return &walker{rules: map[string]bool{}, cel: map[string][]string{}, seen: map[string]bool{}}
}

// walk visits schema s at object node (the base spec's value there, nil when absent) and path.
func (w *walker) walk(s *apiextensionsv1.JSONSchemaProps, node any, path []seg, spath string) {
	for _, r := range s.XValidations {
		w.cel[spath] = append(w.cel[spath], r.Rule)
	}
	w.scalarBounds(s, path, spath)
	w.listBounds(s, node, path, spath)
	obj, _ := node.(map[string]any)
	if s.MaxProperties != nil {
		w.maxProps(s, path, spath)
	}
	for _, req := range s.Required {
		if obj != nil {
			w.add(schemaCase{rule: spath + " required " + req, path: with(path, req), delete: true})
		}
	}
	for name, child := range s.Properties {
		if obj == nil {
			continue
		}
		w.walk(&child, obj[name], with(path, name), spath+"."+name)
	}
	if s.Items != nil && s.Items.Schema != nil {
		list, _ := node.([]any)
		for i, el := range list {
			w.walk(s.Items.Schema, el, with(path, i), spath+"[]")
		}
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil && obj != nil {
		for k, v := range obj {
			w.walk(ap.Schema, v, with(path, "["+k+"]"), spath+"[*]")
		}
	}
}

func with(path []seg, s seg) []seg { return append(append([]seg{}, path...), s) }

func (w *walker) add(c schemaCase) {
	key := c.rule + " " + describe(&c)
	if w.seen[key] {
		return
	}
	w.seen[key] = true
	w.rules[c.rule] = true
	w.cases = append(w.cases, c)
}

func (w *walker) scalarBounds(s *apiextensionsv1.JSONSchemaProps, path []seg, spath string) {
	if s.Minimum != nil {
		m := *s.Minimum
		w.add(schemaCase{rule: spath + " minimum", path: path, value: m - 1})
		// Zero is "unset" for most Go fields: a negative value must be refused all the same.
		w.add(schemaCase{rule: spath + " minimum", path: path, value: min(m-1, -5)})
		w.add(schemaCase{rule: spath + " minimum", path: path, value: m})
	}
	if s.Maximum != nil {
		m := *s.Maximum
		w.add(schemaCase{rule: spath + " maximum", path: path, value: m + 1})
		w.add(schemaCase{rule: spath + " maximum", path: path, value: float64(math.MaxInt32)})
		w.add(schemaCase{rule: spath + " maximum", path: path, value: m})
	}
	if s.MaxLength != nil {
		n := int(*s.MaxLength)
		w.add(schemaCase{rule: spath + " maxLength", path: path, value: fill(s.Pattern, n+1)})
		w.add(schemaCase{rule: spath + " maxLength", path: path, value: fill(s.Pattern, n)})
	}
	if s.Pattern != "" {
		for _, v := range patternCorpus {
			w.add(schemaCase{rule: spath + " pattern", path: path, value: v})
		}
	}
	for _, e := range s.Enum {
		w.add(schemaCase{rule: spath + " enum", path: path, value: string(e.Raw[1 : len(e.Raw)-1])})
	}
	if len(s.Enum) > 0 {
		w.add(schemaCase{rule: spath + " enum", path: path, value: "Bogus"})
	}
}

// patternCorpus are strings on both sides of the schema's patterns; each case expects the
// renderer to agree with the API server on it.
var patternCorpus = []string{
	"bad value!", "a", "A", "0", "-a", "a-", "a_b", "a.b", "a/b", "0x", "0x7f0000000000",
	"0x12345678901234567", "/", "/a b", "/tmp/x", "a;b", "intel.com/vf", "intel.com/", "02:00:00:00:00:01",
	"02:00:00:00:00:0g", "0000:3b:00.0", "3b:00.0", "3b:00.8", "80", "80-90", "123456", "1-2-3",
	"é", "a\tb", "a\nb", "\u00a0", "1Gi", "512Mi", "-1", "1e3", "1.5Gi", "cubic", "Cubic",
}

// fill returns n characters matching pattern where one of a few shapes does.
func fill(pattern string, n int) string {
	shapes := []func(int) string{
		func(n int) string { return strings.Repeat("a", n) },
		func(n int) string { return "/" + strings.Repeat("a", n-1) },
		func(n int) string { return "a/" + strings.Repeat("a", n-2) },
	}
	if pattern == "" {
		return shapes[0](n)
	}
	re := regexp.MustCompile(pattern)
	for _, f := range shapes {
		if s := f(n); re.MatchString(s) && re.MatchString(f(n+1)) {
			return s
		}
	}
	return shapes[0](n)
}

func (w *walker) maxProps(s *apiextensionsv1.JSONSchemaProps, path []seg, spath string) {
	for _, n := range []int{int(*s.MaxProperties) + 1, int(*s.MaxProperties)} {
		m := map[string]any{}
		for i := 0; i < n; i++ {
			m[fmt.Sprintf("kern.k%d", i)] = "1"
		}
		w.add(schemaCase{rule: spath + " maxProperties", path: path, value: m})
	}
}

func (w *walker) listBounds(s *apiextensionsv1.JSONSchemaProps, node any, path []seg, spath string) {
	list, _ := node.([]any)
	if len(list) == 0 {
		return
	}
	if s.MaxItems != nil {
		n := int(*s.MaxItems)
		w.add(w.sized(spath+" maxItems", path, list, n+1, s))
		w.add(w.sized(spath+" maxItems", path, list, n, s))
	}
	if s.MinItems != nil {
		n := int(*s.MinItems)
		w.add(w.sized(spath+" minItems", path, list, n-1, s))
		w.add(w.sized(spath+" minItems", path, list, n, s))
	}
	if t := s.XListType; t != nil && (*t == "set" || *t == "map") {
		dup := append(append([]any{}, list[0]), list[0])
		w.add(schemaCase{rule: spath + " listType=" + *t, path: path, value: dup})
	}
}

// sized is the list grown or shrunk to n items, distinct where the list type needs it.
func (w *walker) sized(rule string, path []seg, list []any, n int, s *apiextensionsv1.JSONSchemaProps) schemaCase {
	out := make([]any, n)
	for i := range out {
		out[i] = distinct(list[0], i, s.XListMapKeys)
	}
	c := schemaCase{rule: rule, path: path, value: out}
	if strings.HasSuffix(rule, ".processes maxItems") || strings.HasSuffix(rule, ".processes minItems") {
		// Process indices must stay below spec.processes (a CEL rule of its own).
		c.extra = func(spec map[string]any) { spec["processes"] = float64(max(n, 1)) }
	}
	return c
}

// distinct makes item i of a list from its first item: the map keys or the scalar varied by i.
func distinct(proto any, i int, keys []string) any {
	if i == 0 {
		return deepCopy(proto)
	}
	switch v := proto.(type) {
	case map[string]any:
		out := deepCopy(v).(map[string]any)
		for _, k := range keys {
			switch out[k].(type) {
			case string:
				out[k] = fmt.Sprintf("k%d", i)
			case int64:
				out[k] = int64(i + 1)
			}
		}
		return out
	case int64:
		return int64(i)
	case string:
		return lastNumber.ReplaceAllString(v, fmt.Sprint(i+1000))
	}
	return proto
}

var lastNumber = regexp.MustCompile(`[0-9]+$`)
