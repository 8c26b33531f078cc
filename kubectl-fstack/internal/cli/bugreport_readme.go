package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// readme is README.md: the index for people, first what the report holds and how it was
// redacted and bounded, then every file, then every item that could not be collected.
func (a *bugArchive) readme() []byte {
	var b strings.Builder
	ix := &a.index
	fmt.Fprintf(&b, "# kube-fstack bug report\n\n")
	fmt.Fprintf(&b, "Collected %s by `kubectl fstack bug-report` (plugin %s) for %s.\n\n", ix.Created.Format(time.RFC3339), cell(ix.Plugin), cell(ix.Scope))
	fmt.Fprintf(&b, "**Redacted.** No Secret was read. In every object: the value of %s and of every environment variable whose name has "+
		"TOKEN, PASSWORD, PASSWD, SECRET, KEY or CREDENTIAL in it, the argument of every flag naming a token, password, credential or API key, "+
		"the %s annotation, and metadata.managedFields. In every file: each of those values wherever it was copied to, "+
		"the %s header's value, the tokens that follow `Bearer`, and NAME=value of such variables. The kubeconfig is not included, nor the API server's address "+
		"or the user's name, but for where an error message names them. Each is replaced by %q.\n\n",
		podcontract.EnvStatusToken, lastApplied, podcontract.StatusTokenHeader, redacted)
	fmt.Fprintf(&b, "**Bounded.** Each log is its container's last %d lines at most (--max-log-lines), no file is larger than %s "+
		"(--max-file-size; a log keeps its end, any other file its start), the files take %s at most (--max-size). Cut files say so below.\n\n",
		ix.Limits.LogLines, byteSize(ix.Limits.FileBytes), byteSize(ix.Limits.TotalBytes))
	fmt.Fprintf(&b, "index.json lists the same as a `%s` `%s`, for scripts.\n\n", ix.Kind, ix.APIVersion)
	fmt.Fprintf(&b, "## Collected (%d files)\n\n| file | what | bytes | cut |\n|---|---|---|---|\n", len(ix.Files))
	for _, f := range ix.Files {
		fmt.Fprintf(&b, "| %s | %s | %d | %s |\n", cell(f.Path), cell(f.What), f.Bytes, cell(f.Truncated))
	}
	fmt.Fprintf(&b, "\n## Not collected (%d)\n\n", len(ix.Missing))
	if len(ix.Missing) == 0 {
		b.WriteString("Everything asked for was collected.\n")
		return []byte(b.String())
	}
	b.WriteString("| what | file | reason |\n|---|---|---|\n")
	for _, m := range ix.Missing {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(m.What), cell(m.Path), cell(m.Reason))
	}
	return []byte(b.String())
}

// cell is s fit for a Markdown table's cell on one line: printable (safe), its pipes escaped.
func cell(s string) string {
	return strings.ReplaceAll(safe(s), "|", `\|`)
}
