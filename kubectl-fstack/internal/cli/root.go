// Package cli is the kubectl-fstack command line: offline tools over the same pure packages the
// operator and the dataplane use, and views of a cluster's stacks through the user's kubeconfig.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// errReported marks a failure whose details were already printed to stderr.
var errReported = errors.New("reported")

// Run executes the CLI and returns the process exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "kubectl-fstack",
		Short:         "kube-fstack's tools: render F-Stack's config.ini and inject the dataplane offline, show a cluster's stacks",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Usage lines say how a kubectl user runs it (`kubectl fstack render ...`); the
		// completion script is still the executable's (cobra takes it from Use).
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl fstack"},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.AddCommand(newRenderCommand(stdout, stderr), newInjectCommand(stdout, stderr))
	root.AddCommand(newStatusCommand(stdout, stderr), newConfigCommand(stdout))
	root.AddCommand(newDoctorCommand(stdout, stderr))
	root.AddCommand(newVersionCommand(stdout, stderr))
	if err := root.Execute(); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintln(stderr, "error:", err)
		}
		return 1
	}
	return 0
}
