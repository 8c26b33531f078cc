package ovsdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Op is one operation of a transaction, in the wire form of RFC 7047 section 5.2. A map keeps
// the encoding exact: the server rejects members an operation does not define.
type Op map[string]any

// Result is the server's answer to one operation.
type Result struct {
	Count   int      `json:"count,omitempty"`
	UUID    []string `json:"uuid,omitempty"`
	Rows    []Row    `json:"rows,omitempty"`
	Error   string   `json:"error,omitempty"`
	Details string   `json:"details,omitempty"`
}

// TxError says which operation of a transaction failed and why. The whole transaction was
// rolled back by the server.
type TxError struct {
	Index   int // -1 when the commit itself failed
	Op      string
	Err     string
	Details string
}

func (e *TxError) Error() string {
	return fmt.Sprintf("ovsdb: transaction failed at operation %d (%s): %s: %s", e.Index, e.Op, e.Err, e.Details)
}

// IsConditionFailed reports whether err is a transaction aborted by a "wait" operation whose
// condition did not hold (RFC 7047 reports it as "timed out").
func IsConditionFailed(err error) bool {
	var tx *TxError
	return errors.As(err, &tx) && tx.Op == "wait" && tx.Err == "timed out"
}

// IsConstraintViolation reports whether err is a transaction refused by a schema constraint,
// typically a duplicate name in an indexed column.
func IsConstraintViolation(err error) bool {
	var tx *TxError
	return errors.As(err, &tx) && tx.Err == "constraint violation"
}

// IsDuplicateUUID reports whether err is an insert refused because a row with the UUID it asked
// for (InsertWithUUID) exists.
func IsDuplicateUUID(err error) bool {
	var tx *TxError
	return errors.As(err, &tx) && tx.Err == "duplicate uuid"
}

// Transact runs ops atomically on database db.
func (c *Client) Transact(ctx context.Context, db string, ops ...Op) ([]Result, error) {
	params := make([]any, 0, len(ops)+1)
	params = append(params, db)
	for _, op := range ops {
		params = append(params, map[string]any(op))
	}
	raw, err := c.call(ctx, "transact", params)
	if err != nil {
		return nil, err
	}
	results, err := decodeResults(raw)
	if err != nil {
		return nil, fmt.Errorf("ovsdb: decode transact result: %w", err)
	}
	return results, checkResults(ops, results)
}

// decodeResults reads the results member by member into Result (a null, for an operation after
// a failed one, is an empty Result): through maps, so without encoding/json's per-struct
// reflection set-up, which each CNI call paid again.
func decodeResults(raw json.RawMessage) ([]Result, error) {
	var wire []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, err
	}
	results := make([]Result, len(wire))
	for i, m := range wire {
		r := &results[i]
		for _, f := range []struct {
			name string
			dst  any
		}{{"count", &r.Count}, {"uuid", &r.UUID}, {"rows", &r.Rows}, {"error", &r.Error}, {"details", &r.Details}} {
			if v, ok := m[f.name]; ok {
				if err := json.Unmarshal(v, f.dst); err != nil {
					return nil, fmt.Errorf("%s: %w", f.name, err)
				}
			}
		}
	}
	return results, nil
}

func checkResults(ops []Op, results []Result) error {
	for i, r := range results {
		if r.Error == "" {
			continue
		}
		if i >= len(ops) {
			return &TxError{Index: -1, Op: "commit", Err: r.Error, Details: r.Details}
		}
		name, _ := ops[i]["op"].(string)
		return &TxError{Index: i, Op: name, Err: r.Error, Details: r.Details}
	}
	if len(results) < len(ops) {
		return fmt.Errorf("ovsdb: %d results for %d operations", len(results), len(ops))
	}
	return nil
}

// Cond is a condition of a "where" clause: column, function ("==", "includes", ...), value.
func Cond(column, function string, value any) []any { return []any{column, function, value} }

// Select returns the rows of table matching where, with only the named columns.
func Select(table string, where [][]any, columns ...string) Op {
	op := Op{"op": "select", "table": table, "where": nonNil(where)}
	if len(columns) > 0 {
		op["columns"] = columns
	}
	return op
}

// Insert adds row to table; uuidName lets later operations of the same transaction refer to it.
func Insert(table string, row map[string]any, uuidName string) Op {
	op := Op{"op": "insert", "table": table, "row": row}
	if uuidName != "" {
		op["uuid-name"] = uuidName
	}
	return op
}

// InsertWithUUID is Insert of a row whose UUID the client chooses (an Open vSwitch extension of
// RFC 7047, in ovsdb-server since 2.14 or so; 3.1 is what the project runs), so later
// transactions can name the row without looking it up first.
func InsertWithUUID(table string, row map[string]any, uuidName, uuid string) Op {
	op := Insert(table, row, uuidName)
	op["uuid"] = uuid
	return op
}

// Mutate changes columns in place ("insert"/"delete" on sets and maps), so concurrent
// transactions on the same row never overwrite each other's changes.
func Mutate(table string, where [][]any, mutations ...[]any) Op {
	return Op{"op": "mutate", "table": table, "where": nonNil(where), "mutations": mutations}
}

// Delete removes the matching rows.
func Delete(table string, where [][]any) Op {
	return Op{"op": "delete", "table": table, "where": nonNil(where)}
}

// WaitEqual aborts the transaction unless the rows matching where, projected onto columns,
// are exactly rows. A zero timeout checks once instead of waiting.
func WaitEqual(table string, where [][]any, columns []string, rows []map[string]any) Op {
	return Op{"op": "wait", "table": table, "where": nonNil(where), "columns": columns,
		"until": "==", "rows": rows, "timeout": 0}
}

// WaitUntilNot blocks the transaction, up to timeout milliseconds, until the rows matching
// where, projected onto columns, differ from rows; then the server fails it "timed out".
func WaitUntilNot(table string, where [][]any, columns []string, rows []map[string]any, timeout int) Op {
	return Op{"op": "wait", "table": table, "where": nonNil(where), "columns": columns,
		"until": "!=", "rows": rows, "timeout": timeout}
}

func nonNil(where [][]any) [][]any {
	if where == nil {
		return [][]any{}
	}
	return where
}

// UUID is a reference to an existing row.
func UUID(id string) []any { return []any{"uuid", id} }

// NamedUUID refers to a row inserted earlier in the same transaction.
func NamedUUID(name string) []any { return []any{"named-uuid", name} }

// Set builds an OVSDB set value.
func Set(elems ...any) []any {
	if elems == nil {
		elems = []any{}
	}
	return []any{"set", elems}
}

// Map builds an OVSDB map value with string keys and values, in a stable order.
func Map(m map[string]string) []any {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]any, 0, len(m))
	for _, k := range keys {
		pairs = append(pairs, []any{k, m[k]})
	}
	return []any{"map", pairs}
}
