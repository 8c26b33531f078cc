package podcontract

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable makes text a pod or a node wrote fit to print on a terminal or in an Event's note
// (which kubectl describe prints raw): every rune that is not printable (control characters,
// ESC, DEL, C1 controls, Unicode format characters such as bidi overrides) and every byte that
// is not UTF-8 is shown escaped as text, strconv.Quote style (\x1b, \n, \u202e). Text that is
// printable already comes back as it is.
func Printable(s string) string {
	if isPrintable(s) {
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

func isPrintable(s string) bool {
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 || !unicode.IsPrint(r) {
			return false
		}
		i += w
	}
	return true
}

// Clip bounds text from a pod or a node for a message: cut to at most n bytes on a rune
// boundary, the cut marked with "...". Pair it with Printable for text that goes to a terminal.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 3 {
		return s[:n]
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
