package ovsdb

import (
	"encoding/json"
	"fmt"
)

// Row is one row of a select result, column by column in wire form.
type Row map[string]json.RawMessage

// String returns a string (or an empty optional) column.
func (r Row) String(column string) (string, error) {
	raw, ok := r[column]
	if !ok {
		return "", fmt.Errorf("ovsdb: column %q not in row", column)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var set []json.RawMessage
	if err := json.Unmarshal(raw, &set); err != nil || len(set) != 2 {
		return "", fmt.Errorf("ovsdb: column %q is not a string: %s", column, raw)
	}
	return "", nil // ["set", []]: an optional string that is not set
}

// UUID returns a uuid column, such as "_uuid".
func (r Row) UUID(column string) (string, error) {
	raw, ok := r[column]
	if !ok {
		return "", fmt.Errorf("ovsdb: column %q not in row", column)
	}
	var pair [2]string
	if err := json.Unmarshal(raw, &pair); err != nil || pair[0] != "uuid" {
		return "", fmt.Errorf("ovsdb: column %q is not a uuid: %s", column, raw)
	}
	return pair[1], nil
}

// Map returns a map column with string keys and values (options, external_ids, status).
func (r Row) Map(column string) (map[string]string, error) {
	raw, ok := r[column]
	if !ok {
		return nil, fmt.Errorf("ovsdb: column %q not in row", column)
	}
	var wire struct {
		Tag   string
		Pairs [][2]string
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 2 {
		return nil, fmt.Errorf("ovsdb: column %q is not a map: %s", column, raw)
	}
	if err := json.Unmarshal(parts[0], &wire.Tag); err != nil || wire.Tag != "map" {
		return nil, fmt.Errorf("ovsdb: column %q is not a map: %s", column, raw)
	}
	if err := json.Unmarshal(parts[1], &wire.Pairs); err != nil {
		return nil, fmt.Errorf("ovsdb: column %q is not a string map: %w", column, err)
	}
	m := make(map[string]string, len(wire.Pairs))
	for _, p := range wire.Pairs {
		m[p[0]] = p[1]
	}
	return m, nil
}

// UUIDs returns a set-of-uuid column (a bridge's ports, a port's interfaces): on the wire a
// one-element set is the bare ["uuid", id].
func (r Row) UUIDs(column string) ([]string, error) {
	raw, ok := r[column]
	if !ok {
		return nil, fmt.Errorf("ovsdb: column %q not in row", column)
	}
	if id, err := r.UUID(column); err == nil {
		return []string{id}, nil
	}
	var parts []json.RawMessage
	var tag string
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 2 || json.Unmarshal(parts[0], &tag) != nil || tag != "set" {
		return nil, fmt.Errorf("ovsdb: column %q is not a set of uuids: %s", column, raw)
	}
	var elems [][2]string
	if err := json.Unmarshal(parts[1], &elems); err != nil {
		return nil, fmt.Errorf("ovsdb: column %q is not a set of uuids: %w", column, err)
	}
	ids := make([]string, 0, len(elems))
	for _, e := range elems {
		if e[0] != "uuid" {
			return nil, fmt.Errorf("ovsdb: column %q holds %q, not a uuid", column, e[0])
		}
		ids = append(ids, e[1])
	}
	return ids, nil
}

// OptionalInt returns an optional integer column (such as Interface.ofport); set is false when
// it holds no value.
func (r Row) OptionalInt(column string) (n int64, set bool, err error) {
	raw, ok := r[column]
	if !ok {
		return 0, false, fmt.Errorf("ovsdb: column %q not in row", column)
	}
	if json.Unmarshal(raw, &n) == nil {
		return n, true, nil
	}
	var parts []json.RawMessage
	var tag string
	var elems []int64
	if json.Unmarshal(raw, &parts) != nil || len(parts) != 2 || json.Unmarshal(parts[0], &tag) != nil ||
		tag != "set" || json.Unmarshal(parts[1], &elems) != nil || len(elems) > 1 {
		return 0, false, fmt.Errorf("ovsdb: column %q is not an optional integer: %s", column, raw)
	}
	if len(elems) == 0 {
		return 0, false, nil
	}
	return elems[0], true, nil
}

// Bool returns a boolean column (such as Open_vSwitch.dpdk_initialized).
func (r Row) Bool(column string) (bool, error) {
	raw, ok := r[column]
	if !ok {
		return false, fmt.Errorf("ovsdb: column %q not in row", column)
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("ovsdb: column %q is not a boolean: %s", column, raw)
	}
	return b, nil
}
