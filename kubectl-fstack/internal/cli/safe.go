package cli

import "github.com/kube-fstack/kube-fstack/internal/podcontract"

// safe makes a string from the cluster fit to print on a terminal. What doctor and status show
// comes from objects that others write: the node report annotation (the node agent, so anyone
// who controls a node or may edit nodes), pod annotations and status, StackInstance status. An
// escape sequence printed verbatim could rewrite the screen, hide a failed check or set the
// window title; so every rune that is not printable (control characters, ESC, DEL, C1 controls,
// Unicode format characters such as bidi overrides) and every byte that is not UTF-8 is shown
// escaped as text, strconv.Quote style (\x1b, \n, \u202e).
func safe(s string) string { return podcontract.Printable(s) }
