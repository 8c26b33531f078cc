package main

import "strings"

// code is s as a Markdown code span, with a fence long enough for the backticks inside it.
func code(s string) string {
	if s == "" {
		return `""`
	}
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// paragraphs joins each paragraph's lines (doc comments wrap at ~100 columns) and separates the
// paragraphs with sep.
func paragraphs(s, sep string) string {
	var out []string
	for _, p := range strings.Split(strings.TrimSpace(s), "\n\n") {
		lines := strings.Fields(strings.ReplaceAll(p, "\n", " "))
		if len(lines) > 0 {
			out = append(out, strings.Join(lines, " "))
		}
	}
	return strings.Join(out, sep)
}

// cell is prose for one table cell: one line, paragraphs as <br><br>, no raw HTML or pipes that
// would end the cell (code spans keep their text, pipes escaped as GitHub's tables require).
func cell(s string) string {
	p := paragraphs(s, "\x00")
	parts := strings.Split(p, "`")
	for i := range parts {
		if i%2 == 0 {
			parts[i] = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(parts[i])
		}
		parts[i] = strings.ReplaceAll(parts[i], "|", `\|`)
	}
	return strings.ReplaceAll(strings.Join(parts, "`"), "\x00", "<br><br>")
}

// pipes escapes the pipes of a table cell (GitHub's tables end a cell at any unescaped one, even
// inside a code span).
func pipes(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
