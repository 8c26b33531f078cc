// Package nginxconf reads the configuration an Nginx command will use (the file of -c or the
// compiled-in default, its includes, and the -g directives) and checks it against what
// F-Stack's shim needs (docs/fstack-rules.md §5-§6): settings that make the shim misbehave are
// refused with the file, line and directive and what to write instead, and what can be fixed
// from the command line becomes extra -g directives. The file is the user's: reading is bounded
// in depth, file count and size, and only regular files are read.
package nginxconf

import (
	"fmt"
	"strings"
)

// token is one word of nginx's syntax, or one of the punctuation tokens ";", "{", "}".
type token struct {
	text   string
	line   int
	quoted bool // a quoted word is never punctuation
}

func (t token) is(punct string) bool { return !t.quoted && t.text == punct }

// lex splits src the way nginx's ngx_conf_read_token does: words separated by blanks, ";" "{"
// "}" as tokens of their own, "#" starting a comment at the start of a word, single and double
// quotes with backslash escapes, a backslash escaping the next character outside quotes, and
// "${" inside a word starting a variable (its braces belong to the word).
func lex(src string) ([]token, error) {
	l := &lexer{src: src, line: 1}
	for {
		l.skipBlanksAndComments()
		if l.pos >= len(l.src) {
			return l.out, nil
		}
		var err error
		switch c := l.src[l.pos]; c {
		case ';', '{', '}':
			l.out = append(l.out, token{text: string(c), line: l.line})
			l.pos++
		case '"', '\'':
			err = l.quoted(c)
		default:
			l.word()
		}
		if err != nil {
			return nil, err
		}
	}
}

type lexer struct {
	src  string
	pos  int
	line int
	out  []token
}

func (l *lexer) skipBlanksAndComments() {
	for l.pos < len(l.src) {
		switch l.src[l.pos] {
		case '\n':
			l.line++
			l.pos++
		case ' ', '\t', '\r':
			l.pos++
		case '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		default:
			return
		}
	}
}

func (l *lexer) quoted(q byte) error {
	start := l.line
	l.pos++
	var b strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		l.pos++
		switch {
		case c == q:
			if l.pos < len(l.src) && !strings.ContainsRune(" \t\r\n;{}", rune(l.src[l.pos])) {
				return fmt.Errorf("line %d: unexpected %q after a quoted string", l.line, l.src[l.pos])
			}
			l.out = append(l.out, token{text: b.String(), line: start, quoted: true})
			return nil
		case c == '\\' && l.pos < len(l.src):
			b.WriteByte(unescape(l.src[l.pos]))
			l.pos++
		default:
			if c == '\n' {
				l.line++
			}
			b.WriteByte(c)
		}
	}
	return fmt.Errorf("line %d: unterminated quoted string", start)
}

// unescape follows nginx: \t \r \n are control characters, any other escaped character is itself.
func unescape(c byte) byte {
	switch c {
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case 'n':
		return '\n'
	}
	return c
}

func (l *lexer) word() {
	var b strings.Builder
	line := l.line
	variable := false
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\\' && l.pos+1 < len(l.src):
			b.WriteByte(l.src[l.pos+1])
			l.pos += 2
			variable = false
			continue
		case c == '{' && variable:
			// "${name}": the brace is part of the word, up to the closing one.
			end := strings.IndexByte(l.src[l.pos:], '}')
			if end < 0 {
				end = len(l.src) - l.pos - 1
			}
			b.WriteString(l.src[l.pos : l.pos+end+1])
			l.pos += end + 1
			variable = false
			continue
		case strings.IndexByte(" \t\r\n;{}", c) >= 0:
			l.out = append(l.out, token{text: b.String(), line: line})
			return
		}
		variable = c == '$'
		b.WriteByte(c)
		l.pos++
	}
	l.out = append(l.out, token{text: b.String(), line: line})
}
