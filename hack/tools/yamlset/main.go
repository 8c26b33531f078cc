// Command yamlset sets scalar values of a YAML file in place, by key path, and leaves every
// other byte as it was: comments, blank lines, order, indentation and quoting. make release
// (hack/release.sh) points the packaged chart's values.yaml at the release's images with it;
// values.yaml's comments are what `helm show values` shows a user, so a rewrite that reflowed
// them (a YAML library's encoder does) or an edit keyed on line shapes (awk) would not do.
//
//	yamlset FILE KEY=VALUE...     KEY a dotted path of mapping keys: operator.image.digest
//
// The file is parsed with a YAML parser (go.yaml.in/yaml/v3) to find each key's scalar; only
// that scalar's text is replaced, by the value encoded in the scalar's own style (plain, single
// or double quoted). The result is parsed again and must decode to the original with exactly
// those keys changed, or nothing is written.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "yamlset:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: yamlset FILE KEY=VALUE... (KEY a dotted path: operator.image.digest)")
	}
	var edits []edit
	for _, a := range args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: want KEY=VALUE", a)
		}
		edits = append(edits, edit{path: k, value: v})
	}
	info, err := os.Stat(args[0])
	if err != nil {
		return err
	}
	src, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	out, err := set(src, edits)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	return os.WriteFile(args[0], out, info.Mode().Perm())
}

// edit sets the scalar at path (dotted mapping keys) to value, a string.
type edit struct {
	path, value string
}

// span is the bytes of src an edit replaces.
type span struct {
	start, end int
	text       string
}

// set returns src with each edit's scalar replaced and nothing else changed.
func set(src []byte, edits []edit) ([]byte, error) {
	var doc, more yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	// Only the first document would be checked after the edit: refuse a second.
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("want one YAML document")
	}
	lines := lineStarts(src)
	var spans []span
	seen := map[string]bool{}
	for _, e := range edits {
		if seen[e.path] {
			return nil, fmt.Errorf("%s is set twice", e.path)
		}
		seen[e.path] = true
		n, err := lookup(doc.Content[0], e.path)
		if err != nil {
			return nil, err
		}
		s, err := scalarSpan(src, lines, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.path, err)
		}
		if s.text, err = encode(e.value, n.Style); err != nil {
			return nil, fmt.Errorf("%s: %w", e.path, err)
		}
		spans = append(spans, s)
	}
	// From the end, so each span's offsets still hold when it is replaced.
	slices.SortFunc(spans, func(a, b span) int { return b.start - a.start })
	out := slices.Clone(src)
	for _, s := range spans {
		out = slices.Concat(out[:s.start], []byte(s.text), out[s.end:])
	}
	if err := onlyTheseChanged(src, out, edits); err != nil {
		return nil, err
	}
	return out, nil
}

// lookup walks path's keys through block mappings to a scalar.
func lookup(root *yaml.Node, path string) (*yaml.Node, error) {
	n := root
	keys := strings.Split(path, ".")
	for i, k := range keys {
		at := strings.Join(keys[:i], ".")
		if at == "" {
			at = "the top level"
		}
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: %s is not a mapping", path, at)
		}
		if n.Style&yaml.FlowStyle != 0 {
			return nil, fmt.Errorf("%s: %s is a flow mapping ({...}); only block mappings are edited in place", path, at)
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == k {
				next = n.Content[j+1]
				break
			}
		}
		if next == nil {
			return nil, fmt.Errorf("%s: %s has no key %q", path, at, k)
		}
		if next.Kind == yaml.AliasNode || next.Anchor != "" {
			return nil, fmt.Errorf("%s: an anchor or alias; setting it would change every use", path)
		}
		n = next
	}
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("%s is not a scalar", path)
	}
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return nil, fmt.Errorf("%s is a block scalar (| or >); only one-line scalars are edited in place", path)
	}
	if n.Tag != "" && n.Style&yaml.TaggedStyle != 0 {
		return nil, fmt.Errorf("%s has an explicit tag; only untagged scalars are edited in place", path)
	}
	return n, nil
}

// lineStarts are the byte offsets at which each line of src starts.
func lineStarts(src []byte) []int {
	starts := []int{0}
	for i, b := range src {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// scalarSpan finds the bytes of scalar n on its line: the parser gives where it starts (line and
// column, counting characters), its style where it ends.
func scalarSpan(src []byte, lines []int, n *yaml.Node) (span, error) {
	if n.Line < 1 || n.Line > len(lines) {
		return span{}, fmt.Errorf("line %d is outside the file", n.Line)
	}
	lineEnd := len(src)
	if n.Line < len(lines) {
		lineEnd = lines[n.Line] - 1
	}
	line := src[lines[n.Line-1]:lineEnd]
	start := 0
	for c := 1; c < n.Column; c++ {
		if start >= len(line) {
			return span{}, fmt.Errorf("line %d: column %d is past the line's end", n.Line, n.Column)
		}
		_, w := utf8.DecodeRune(line[start:])
		start += w
	}
	rest := line[start:]
	end := -1
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		for i := 1; i < len(rest); i++ {
			if rest[i] == '\\' {
				i++
			} else if rest[i] == '"' {
				end = i + 1
				break
			}
		}
	case n.Style&yaml.SingleQuotedStyle != 0:
		for i := 1; i < len(rest); i++ {
			if rest[i] == '\'' {
				if i+1 < len(rest) && rest[i+1] == '\'' {
					i++
					continue
				}
				end = i + 1
				break
			}
		}
	default:
		// A plain scalar ends at a comment (" #") or the line's end.
		end = len(rest)
		if i := bytes.Index(rest, []byte(" #")); i >= 0 {
			end = i
		}
		end = len(bytes.TrimRight(rest[:end], " \t\r"))
	}
	if end < 0 {
		return span{}, fmt.Errorf("line %d: the quoted scalar does not end on its line; only one-line scalars are edited in place", n.Line)
	}
	off := lines[n.Line-1] + start
	return span{start: off, end: off + end}, nil
}

// encode writes value as a YAML string scalar in style when it can be (plain falls back to a
// quoted style when the value would read as another type or is not plain-safe, as the encoder
// decides), on one line.
func encode(value string, style yaml.Style) (string, error) {
	b, err := yaml.Marshal(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Style: style & (yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle)})
	if err != nil {
		return "", err
	}
	text := strings.TrimSuffix(string(b), "\n")
	if strings.Contains(text, "\n") {
		return "", fmt.Errorf("the value %q takes more than one line", value)
	}
	return text, nil
}

// onlyTheseChanged decodes before and after: after must be before with each edit's key set to its
// value, and nothing else different.
func onlyTheseChanged(before, after []byte, edits []edit) error {
	var want, got any
	if err := yaml.Unmarshal(before, &want); err != nil {
		return err
	}
	if err := yaml.Unmarshal(after, &got); err != nil {
		return fmt.Errorf("the edit broke the YAML (%w); nothing written", err)
	}
	for _, e := range edits {
		if !setIn(want, strings.Split(e.path, "."), e.value) {
			return fmt.Errorf("%s: not found when decoded", e.path)
		}
	}
	if !reflect.DeepEqual(want, got) {
		return errors.New("the edit changed more than the keys it sets; nothing written")
	}
	return nil
}

// setIn sets keys' value in v, decoded YAML (a mapping decodes to map[string]any, or to
// map[any]any when a key is not a string).
func setIn(v any, keys []string, value string) bool {
	switch m := v.(type) {
	case map[string]any:
		if len(keys) == 1 {
			m[keys[0]] = value
			return true
		}
		return setIn(m[keys[0]], keys[1:], value)
	case map[any]any:
		if len(keys) == 1 {
			m[keys[0]] = value
			return true
		}
		return setIn(m[keys[0]], keys[1:], value)
	}
	return false
}
