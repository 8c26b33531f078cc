package render_test

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The spec as the API server handles it: untyped JSON.

// apply returns a copy of base with the case's change.
func apply(base map[string]any, c *schemaCase) map[string]any {
	spec := deepCopy(base).(map[string]any)
	var parent any = spec
	for i, s := range c.path {
		last := i == len(c.path)-1
		switch p := parent.(type) {
		case map[string]any:
			key := strings.Trim(fmt.Sprint(s), "[]")
			if last {
				if c.delete {
					delete(p, key)
				} else {
					p[key] = deepCopy(c.value)
				}
				break
			}
			parent = p[key]
		case []any:
			if last {
				p[s.(int)] = deepCopy(c.value)
				break
			}
			parent = p[s.(int)]
		}
	}
	if c.extra != nil {
		c.extra(spec)
	}
	return normalize(spec)
}

// lookup returns the value at path.
func lookup(v any, path []seg) (any, bool) {
	for _, s := range path {
		switch p := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = p[strings.Trim(fmt.Sprint(s), "[]")]; !ok {
				return nil, false
			}
		case []any:
			i, _ := s.(int)
			if i >= len(p) {
				return nil, false
			}
			v = p[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// normalize gives the spec JSON's types (float64 numbers), as the API server decodes it.
func normalize(spec map[string]any) map[string]any {
	raw, err := json.Marshal(spec)
	if err != nil {
		panic(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return wholeToInt(out).(map[string]any)
}

// wholeToInt turns whole numbers into int64, as the API server's JSON decoder does.
func wholeToInt(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = wholeToInt(e)
		}
	case []any:
		for i, e := range t {
			t[i] = wholeToInt(e)
		}
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
	}
	return v
}
