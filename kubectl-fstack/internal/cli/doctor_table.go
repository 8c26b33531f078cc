package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

// writeTable prints each node: its kube-fstack labels, every check with the stacks that need
// it, a fix line for each check that did not pass, and the stacks it cannot run. Every string of
// the cluster (the report above all: the node agent writes it, and so can anyone who controls the
// node or may edit nodes) goes through safe before it is printed.
func (r *DoctorReport) writeTable(w io.Writer, wide bool) {
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
			writeNodeChecks(w, &n, known, wide)
		}
		if known && len(n.CannotRun) > 0 {
			var s []string
			for _, m := range n.CannotRun {
				s = append(s, m.Stack+" (lacks "+strings.Join(m.Missing, " ")+")")
			}
			fmt.Fprintf(w, "  cannot run: %s\n", safe(strings.Join(s, ", ")))
		}
	}
	r.writePods(w)
	r.writeSetup(w)
	// A stack the injector refuses has no pods to place; say why it was judged nowhere.
	for _, s := range r.Stacks {
		if s.Error != "" {
			fmt.Fprintf(w, "\nStackInstance %s/%s: not judged, the injector refuses it: %s\n", safe(s.Namespace), safe(s.Name), safe(s.Error))
		}
	}
}

func writeNodeChecks(w io.Writer, n *NodeDoctor, known, wide bool) {
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range n.Checks {
		cols := []string{strings.ToUpper(c.Status), c.Name, c.Detail, neededByText(c, known)}
		if wide {
			cols = append(cols, orDash(c.Label))
		}
		for i := range cols {
			cols[i] = safe(cols[i])
		}
		fmt.Fprintf(tw, "  %s\n", strings.Join(cols, "\t"))
	}
	_ = tw.Flush()
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
