package cli

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// safe makes a string from the cluster fit to print on a terminal. What doctor and status show
// comes from objects that others write: the node report annotation (the node agent, so anyone
// who controls a node or may edit nodes), pod annotations and status, StackInstance status. An
// escape sequence printed verbatim could rewrite the screen, hide a failed check or set the
// window title; so every rune that is not printable (control characters, ESC, DEL, C1 controls,
// Unicode format characters such as bidi overrides) and every byte that is not UTF-8 is shown
// escaped as text, strconv.Quote style (\x1b, \n, \u202e).
func safe(s string) string {
	if isSafe(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += w
	}
	return b.String()
}

func isSafe(s string) bool {
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 || !unicode.IsPrint(r) {
			return false
		}
		i += w
	}
	return true
}
