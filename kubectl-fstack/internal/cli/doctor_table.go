package cli

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

// doctorTable are the table's options: -o wide and --no-headers.
type doctorTable struct{ wide, noHeaders bool }

// printIndented prints a table as printTable does (cli-runtime's printer, every cell through
// safe), each line indented under the heading line it belongs to.
func (o doctorTable) printIndented(w io.Writer, names []string, wideFrom int, rows [][]string) error {
	var b bytes.Buffer
	if err := printTable(&b, columns(names, wideFrom), rows, o.wide, o.noHeaders); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line != "" {
			if _, err := io.WriteString(w, "  "+line); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeTable prints each node: its kube-fstack labels, every check with the stacks that need
// it, a fix line for each check that did not pass, and the stacks it cannot run. Every string of
// the cluster (the report above all: the node agent writes it, and so can anyone who controls the
// node or may edit nodes) goes through safe before it is printed. The tables of checks, pods and
// setup checks have a header line each unless noHeaders (--no-headers, as kubectl get's).
func (r *DoctorReport) writeTable(w io.Writer, o doctorTable) error {
	known := r.StacksError == ""
	for i, n := range r.Nodes {
		if i > 0 {
			fmt.Fprintln(w)
		}
		name := safe(n.Name)
		switch {
		case !n.Report:
			fmt.Fprintf(w, "node %s: no report: the kube-fstack node agent has not run there (chart value cni.nodeAgent.enabled; the CNI DaemonSet's nodeSelector and tolerations; its node-agent container's log)\n", name)
		case n.ReportError != "":
			// JSON's errors quote the offending bytes.
			fmt.Fprintf(w, "node %s: unreadable report: %s\n", name, safe(n.ReportError))
		default:
			if err := writeNodeChecks(w, &n, known, o); err != nil {
				return err
			}
		}
		if known && len(n.CannotRun) > 0 {
			var s []string
			for _, m := range n.CannotRun {
				s = append(s, m.Stack+" (lacks "+strings.Join(m.Missing, " ")+")")
			}
			fmt.Fprintf(w, "  cannot run: %s\n", safe(strings.Join(s, ", ")))
		}
	}
	if err := r.writePods(w, o); err != nil {
		return err
	}
	if err := r.writeSetup(w, o); err != nil {
		return err
	}
	// A stack the injector refuses has no pods to place; say why it was judged nowhere.
	for _, s := range r.Stacks {
		if s.Error != "" {
			fmt.Fprintf(w, "\nStackInstance %s/%s: not judged, the injector refuses it: %s\n", safe(s.Namespace), safe(s.Name), safe(s.Error))
		}
	}
	return nil
}

func writeNodeChecks(w io.Writer, n *NodeDoctor, known bool, o doctorTable) error {
	attention, notNeeded := 0, 0
	for _, c := range n.Checks {
		if c.Status == string(nodecheck.Pass) {
			continue
		}
		attention++
		if known && c.Status == string(nodecheck.Fail) && len(c.NeededBy) == 0 {
			notNeeded++
		}
	}
	fmt.Fprintf(w, "node %s: %d of %d checks need attention", safe(n.Name), attention-notNeeded, len(n.Checks))
	if notNeeded > 0 {
		fmt.Fprintf(w, " (%d more failed, needed by no StackInstance)", notNeeded)
	}
	fmt.Fprintln(w)
	var ls []string
	for k, v := range n.Labels {
		ls = append(ls, k+"="+v)
	}
	sort.Strings(ls)
	if len(ls) == 0 {
		ls = []string{"(none)"}
	}
	fmt.Fprintf(w, "  labels: %s\n", safe(strings.Join(ls, " ")))
	rows := make([][]string, 0, len(n.Checks))
	for _, c := range n.Checks {
		rows = append(rows, []string{strings.ToUpper(c.Status), c.Name, c.Detail, neededByText(c, known), orDash(c.Label)})
	}
	if err := o.printIndented(w, []string{"STATUS", "CHECK", "DETAIL", "NEEDED-BY", "LABEL"}, 4, rows); err != nil {
		return err
	}
	for _, c := range n.Checks {
		if c.Status == string(nodecheck.Pass) || c.Fix == "" {
			continue
		}
		line := fmt.Sprintf("  fix %s: %s: %s", safe(c.Name), safe(c.Detail), safe(c.Fix))
		if known && c.Status == string(nodecheck.Fail) && len(c.NeededBy) == 0 {
			line += " (not needed by any StackInstance)"
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// neededByText is the table's last column: who needs the check, "not needed" for a failed check
// nobody needs, "-" for a check that decides no label a stack asks for.
func neededByText(c DoctorCheck, known bool) string {
	switch {
	case !known:
		return "needed by: unknown"
	case len(c.NeededBy) > 0:
		return "needed by " + strings.Join(c.NeededBy, ", ")
	case c.Status == string(nodecheck.Fail):
		return "not needed"
	}
	return "-"
}

// writeVerdict prints on stderr the warnings (what doctor could not read) and the problems, one
// line each, and returns errReported when there is a problem (exit status 1).
func (r *DoctorReport) writeVerdict(stderr io.Writer) error {
	if r.StacksError != "" {
		fmt.Fprintf(stderr, "warning: %s: which stacks need each check is unknown\n", safe(r.StacksError))
	}
	for _, n := range append(append([]string{}, r.PodNotes...), r.SetupNotes...) {
		fmt.Fprintln(stderr, "warning:", safe(n))
	}
	if len(r.Problems) == 0 {
		return nil
	}
	for _, p := range r.Problems {
		fmt.Fprintln(stderr, "error:", safe(p))
	}
	return errReported
}
