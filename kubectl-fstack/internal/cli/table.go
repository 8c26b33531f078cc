package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// tableFlags are kubectl get's flags for a table: --no-headers and, for a table of many rows,
// --sort-by.
type tableFlags struct {
	noHeaders bool
	sortBy    string
}

func (f *tableFlags) add(cmd *cobra.Command, sortHelp string) {
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "When using the default or wide output format, don't print headers.")
	if sortHelp != "" {
		cmd.Flags().StringVar(&f.sortBy, "sort-by", "", sortHelp)
	}
}

// validate refuses --sort-by with a format that is no table, and a JSONPath that does not parse,
// before the cluster is asked.
func (f *tableFlags) validate(o *outputFlags) error {
	if f.sortBy == "" {
		return nil
	}
	if t, _ := o.table(); !t {
		return fmt.Errorf("--sort-by sorts the table's rows: give it without -o, or with -o wide")
	}
	_, err := sortPath(f.sortBy)
	return err
}

// sortPath parses a --sort-by expression as kubectl does: a JSONPath, its braces optional.
func sortPath(expr string) (*jsonpath.JSONPath, error) {
	if !strings.HasPrefix(expr, "{") {
		expr = "{" + expr + "}"
	}
	p := jsonpath.New("sort-by").AllowMissingKeys(true)
	if err := p.Parse(expr); err != nil {
		return nil, fmt.Errorf("--sort-by %q: %w", expr, err)
	}
	return p, nil
}

// sortByPath orders items stably by the value expr finds in each one's JSON form: numbers
// numerically, anything else as text, items where it finds nothing first. This is kubectl get's
// --sort-by; its sorter (k8s.io/kubectl) is not used because it ends the process on a field of
// two types and sorts unstably.
func sortByPath[T any](items []T, expr string) error {
	if expr == "" {
		return nil
	}
	p, err := sortPath(expr)
	if err != nil {
		return err
	}
	keys := make(map[int]any, len(items))
	found := false
	idx := make([]int, len(items))
	for i := range items {
		idx[i] = i
		raw, err := json.Marshal(items[i])
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		res, err := p.FindResults(v)
		if err != nil {
			return fmt.Errorf("--sort-by %q: %w", expr, err)
		}
		if len(res) > 0 && len(res[0]) > 0 {
			keys[i], found = res[0][0].Interface(), true
		}
	}
	if len(items) > 0 && !found {
		return fmt.Errorf("--sort-by %q: no row has that field", expr)
	}
	slices.SortStableFunc(idx, func(a, b int) int { return compareKeys(keys[a], keys[b]) })
	sorted := make([]T, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

// compareKeys orders a missing key first, numbers as numbers, the rest by their text.
func compareKeys(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	x, xok := a.(float64)
	y, yok := b.(float64)
	if xok && yok {
		return cmpFloat(x, y)
	}
	return strings.Compare(text(a), text(b))
}

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func text(v any) string {
	if reflect.TypeOf(v).Kind() == reflect.String {
		return v.(string)
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

// printTable prints a table with cli-runtime's printer, as kubectl get prints one: columns of
// priority 1 only when wide, no header line with noHeaders. Every cell goes through safe first
// (the printer escapes ESC alone).
func printTable(w io.Writer, columns []metav1.TableColumnDefinition, rows [][]string, wide, noHeaders bool) error {
	t := &metav1.Table{ColumnDefinitions: columns}
	for _, r := range rows {
		cells := make([]any, len(r))
		for i := range r {
			cells[i] = safe(r[i])
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{}})
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide, NoHeaders: noHeaders}).PrintObj(t, w)
}

// columns are table columns of the names given; those after wideFrom are shown with -o wide only.
func columns(names []string, wideFrom int) []metav1.TableColumnDefinition {
	out := make([]metav1.TableColumnDefinition, len(names))
	for i, n := range names {
		out[i] = metav1.TableColumnDefinition{Name: n, Type: "string"}
		if wideFrom >= 0 && i >= wideFrom {
			out[i].Priority = 1
		}
	}
	return out
}
