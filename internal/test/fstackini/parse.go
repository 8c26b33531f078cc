// Package fstackini reads config.ini the way F-Stack v1.25 (and 1.24) does: its embedded inih
// tokenizer (multi-line values, inline ";" comments, a 2048-byte line buffer) and the handlers
// of lib/ff_config.c with their order dependencies and post-parse checks (docs/fstack-rules.md
// §1). It shares no code with the renderer, so tests can hold one against the other, and it is
// strict where F-Stack is silent (unknown or repeated keys), so mistakes F-Stack would swallow
// show up as errors.
package fstackini

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// Version selects the key dialect.
type Version string

// The dialects the reader knows.
const (
	V125 Version = "v1.25"
	V124 Version = "1.24"
)

const (
	maxLine       = 2047 // INI_MAX_LINE 2048 with the terminator
	maxSectionLen = 49
)

// Error is a parse or check failure, with the 1-based line when it comes from one line.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// token is one name=value the tokenizer hands the handler.
type token struct {
	line                 int
	section, name, value string
	continuation         bool
}

// tokenize splits the file as inih does with F-Stack's settings.
func tokenize(data []byte) ([]token, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []token
	section, prevName := "", ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		if len(raw) > maxLine {
			return nil, &Error{n, fmt.Sprintf("line of %d characters: F-Stack reads %d and fails on the rest", len(raw), maxLine)}
		}
		line := strings.TrimRight(raw, " \t\r")
		start := strings.TrimLeft(line, " \t")
		indented := len(start) < len(line)
		switch {
		case start == "" || start[0] == ';' || start[0] == '#':
			continue
		case indented && prevName != "":
			// A continuation: the handler gets the previous name again with this value.
			out = append(out, token{n, section, prevName, stripInline(start), true})
		case start[0] == '[':
			end := strings.IndexByte(start, ']')
			if end < 0 {
				return nil, &Error{n, "section header without ']'"}
			}
			section = start[1:end]
			if len(section) > maxSectionLen {
				section = section[:maxSectionLen]
			}
			prevName = ""
		default:
			i := strings.IndexAny(start, "=:")
			if i < 0 {
				return nil, &Error{n, fmt.Sprintf("%q has no '=' or ':'", start)}
			}
			name := strings.TrimSpace(start[:i])
			value := strings.TrimSpace(stripInline(start[i+1:]))
			prevName = name
			out = append(out, token{n, section, name, value, false})
		}
	}
	return out, sc.Err()
}

// stripInline cuts an inline comment: ';' preceded by white space. '#' is not a comment there.
func stripInline(s string) string {
	for i := 1; i < len(s); i++ {
		if s[i] == ';' && (s[i-1] == ' ' || s[i-1] == '\t') {
			return strings.TrimRight(s[:i], " \t")
		}
	}
	return s
}
