package render

import (
	"bytes"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxLineLength is the longest line F-Stack's inih parser reads whole (INI_MAX_LINE 2048 minus
// the terminator); a longer line is split and its tail fails to parse.
const MaxLineLength = 2047

// iniWriter emits config.ini the way F-Stack's parser needs it: no indentation (an indented line
// continues the previous key), no inline comments, every key once per section, every line within
// MaxLineLength. Each key remembers the spec field it came from, so an over-long line is reported
// against that field.
type iniWriter struct {
	buf     bytes.Buffer
	section string
	seen    map[string]bool
	errs    field.ErrorList
}

func newINIWriter() *iniWriter {
	w := &iniWriter{}
	w.buf.Grow(2048)
	return w
}

func (w *iniWriter) Section(name string) {
	if w.buf.Len() > 0 {
		w.buf.WriteByte('\n')
	}
	w.section = name
	w.seen = map[string]bool{}
	w.buf.WriteByte('[')
	w.buf.WriteString(name)
	w.buf.WriteString("]\n")
}

// Key writes key=value. path names the spec field behind the value, for error messages.
func (w *iniWriter) Key(key, value string, path *field.Path) {
	if w.seen[key] {
		// A programming error, not a user error: the parser would silently keep the last value.
		panic(fmt.Sprintf("render: key %q written twice in [%s]", key, w.section))
	}
	w.seen[key] = true
	if n := len(key) + 1 + len(value); n > MaxLineLength {
		w.errs = append(w.errs, field.Invalid(path, truncate(value, 40)+"...", fmt.Sprintf(
			"the config.ini line %s=... would be %d bytes, but F-Stack reads at most %d and fails on the "+
				"rest: shorten the list", key, n, MaxLineLength)))
		return
	}
	w.buf.WriteString(key)
	w.buf.WriteByte('=')
	w.buf.WriteString(value)
	w.buf.WriteByte('\n')
}

func (w *iniWriter) Int(key string, v int64, path *field.Path) {
	w.Key(key, fmt.Sprint(v), path)
}

func (w *iniWriter) Bool(key string, v bool, path *field.Path) {
	w.Key(key, boolDigit(v), path)
}

func (w *iniWriter) Bytes() []byte { return w.buf.Bytes() }

func boolDigit(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// safeValue reports why s cannot be written as a config.ini value, or "" if it can. The parser
// trims surrounding blanks, treats ";" after a blank as a comment start and ends a value at a
// newline.
func safeValue(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case strings.TrimSpace(s) != s:
		return "must not start or end with white space (F-Stack's parser trims it)"
	case strings.ContainsAny(s, "\n\r\x00"):
		return "must be a single line"
	case strings.Contains(s, " ;") || strings.Contains(s, "\t;"):
		return `must not contain " ;" (F-Stack's parser takes the rest as a comment)`
	}
	return ""
}
