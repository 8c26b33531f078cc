// Package jsonw appends JSON to a byte slice for the few shapes fstack-cni writes on its hot path
// (OVSDB requests, log lines) without encoding/json's reflection. encoding/json builds and caches
// an encoder per type on first use; a CNI command lives for one request, so it paid that set-up
// on every call. Anything else goes to encoding/json, so the output is always valid JSON.
package jsonw

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as in encoding/json.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// AppendValue appends v. Maps are written with sorted keys, as encoding/json writes them.
func AppendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case json.RawMessage:
		if v == nil {
			return append(b, "null"...), nil
		}
		return append(b, v...), nil
	case []string:
		return appendList(b, len(v), func(b []byte, i int) ([]byte, error) { return AppendString(b, v[i]), nil })
	case []any:
		return appendList(b, len(v), func(b []byte, i int) ([]byte, error) { return AppendValue(b, v[i]) })
	case [][]any:
		return appendList(b, len(v), func(b []byte, i int) ([]byte, error) { return AppendValue(b, v[i]) })
	case []map[string]any:
		return appendList(b, len(v), func(b []byte, i int) ([]byte, error) { return AppendValue(b, v[i]) })
	case map[string]any:
		return AppendObject(b, v)
	}
	data, err := json.Marshal(v)
	return append(b, data...), err
}

// AppendObject appends m as a JSON object with sorted keys.
func AppendObject(b []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(AppendString(b, k), ':')
		if b, err = AppendValue(b, m[k]); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

func appendList(b []byte, n int, elem func([]byte, int) ([]byte, error)) ([]byte, error) {
	if n == 0 {
		return append(b, "[]"...), nil
	}
	b = append(b, '[')
	var err error
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = elem(b, i); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}
