// Package logtest reads the lines kube-fstack's binaries log (internal/logging), so each
// binary's tests can hold its output to the format and the keys docs/logging.md promises.
package logtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/logging"
)

// Line is one parsed log line: every key with its value as text.
type Line map[string]string

// ParseText reads one line of log/slog's text handler: key=value pairs, a value quoted as a
// Go string when it needs to be. Anything else is an error naming where it stopped.
func ParseText(s string) (Line, error) {
	out := Line{}
	rest := s
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || strings.ContainsAny(rest[:eq], " \"") {
			return nil, fmt.Errorf("no key=value at %q of %q", rest, s)
		}
		key := rest[:eq]
		rest = rest[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("value of %s: %w in %q", key, err, s)
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			end := strings.IndexByte(rest, ' ')
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], rest[end:]
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("key %s twice in %q", key, s)
		}
		out[key] = val
		if rest != "" && !strings.HasPrefix(rest, " ") {
			return nil, fmt.Errorf("no space after %s's value in %q", key, s)
		}
		rest = strings.TrimPrefix(rest, " ")
	}
	return out, nil
}

// ParseJSON reads one line of log/slog's JSON handler; nested values stay JSON text.
func ParseJSON(s string) (Line, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w: %q", err, s)
	}
	out := Line{}
	for k, v := range raw {
		var str string
		if json.Unmarshal(v, &str) == nil {
			out[k] = str
		} else {
			out[k] = string(v)
		}
	}
	return out, nil
}

// Parse reads every non-empty line of out in format (logging.FormatText or FormatJSON) and
// checks each has time, level, msg and component=component.
func Parse(out, format, component string) ([]Line, error) {
	parse := ParseText
	if format == logging.FormatJSON {
		parse = ParseJSON
	}
	var lines []Line
	for _, s := range strings.Split(out, "\n") {
		if s == "" {
			continue
		}
		l, err := parse(s)
		if err != nil {
			return nil, err
		}
		for _, k := range []string{"time", "level"} {
			if l[k] == "" {
				return nil, fmt.Errorf("no %s in %q", k, s)
			}
		}
		if _, ok := l["msg"]; !ok {
			return nil, fmt.Errorf("no msg in %q", s)
		}
		if l[logging.KeyComponent] != component {
			return nil, fmt.Errorf("%s=%q, want %q, in %q", logging.KeyComponent, l[logging.KeyComponent], component, s)
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("no log line at all")
	}
	return lines, nil
}

// Find is the first line whose msg contains msg, and that has every key of want with its value
// ("" for any value).
func Find(lines []Line, msg string, want map[string]string) (Line, bool) {
next:
	for _, l := range lines {
		if !strings.Contains(l["msg"], msg) {
			continue
		}
		for k, v := range want {
			got, ok := l[k]
			if !ok || (v != "" && got != v) {
				continue next
			}
		}
		return l, true
	}
	return nil, false
}

// Readable is out (a container's log: structured lines of a kube-fstack binary, in either
// format, between whatever else the container's program wrote) as a person reads it: each
// structured line becomes its msg, then ": " and its err when it has one, then its other keys
// (not time, level, and the writer's identity: component, container) as key=value, sorted and
// unquoted; other lines stay as they are.
// Tests look for what a message says in it, whatever the format.
func Readable(out string) string {
	var b strings.Builder
	for _, s := range strings.SplitAfter(out, "\n") {
		line := strings.TrimSuffix(s, "\n")
		l, err := ParseText(line)
		if err != nil || l["msg"] == "" || l[logging.KeyComponent] == "" {
			if l, err = ParseJSON(line); err != nil || l["msg"] == "" || l[logging.KeyComponent] == "" {
				b.WriteString(s)
				continue
			}
		}
		b.WriteString(l["msg"])
		if e, ok := l[logging.KeyErr]; ok {
			b.WriteString(": " + e)
		}
		keys := make([]string, 0, len(l))
		for k := range l {
			switch k {
			case "time", "level", "msg", logging.KeyErr, logging.KeyComponent, logging.KeyContainer:
			default:
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteString(" " + k + "=" + l[k])
		}
		b.WriteString("\n")
	}
	return b.String()
}
