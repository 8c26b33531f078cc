package jsonw

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Every shape round-trips through encoding/json's decoder to what encoding/json itself encodes.
func TestAppendValueDecodesLikeEncodingJSON(t *testing.T) {
	values := []any{
		nil, true, "", "plain", "quote\" backslash\\ newline\n tab\t ctl\x01\x1f del\x7f", "é ü 日本 \u2028",
		"bad utf8 \xff\xfe end", 0, -42, int64(1) << 40, uint64(1) << 63, json.RawMessage(`{"a":[1,2]}`),
		[]string{}, []string{"a", "b"}, []any{}, []any{"uuid", "x", 3, nil, []any{"set", []any{}}},
		[][]any{{"name", "==", "br0"}}, []map[string]any{{"datapath_type": "netdev"}},
		map[string]any{"z": 1, "a": "x", "m": map[string]any{"k": []any{"map", []any{[]any{"k", "v"}}}}},
		map[string]any{}, struct{ A int }{7}, 1.5,
	}
	for _, v := range values {
		got, err := AppendValue(nil, v)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		want, _ := json.Marshal(v)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%#v: wrote invalid JSON %s: %v", v, got, err)
		}
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%#v: wrote %s, encoding/json writes %s", v, got, want)
		}
	}
}

func TestAppendObjectSortsKeys(t *testing.T) {
	got, _ := AppendObject(nil, map[string]any{"op": "select", "table": "Port", "columns": []string{"_uuid"}})
	if want := `{"columns":["_uuid"],"op":"select","table":"Port"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
