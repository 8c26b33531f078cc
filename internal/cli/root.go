// Package cli is the kubectl-fstack command line: offline tools over the same pure packages the
// operator and the dataplane use.
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
		Short:         "Offline tools for kube-fstack: render F-Stack's config.ini, inject the dataplane into manifests",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.AddCommand(newRenderCommand(stdout, stderr), newInjectCommand(stdout, stderr))
	root.AddCommand(newDoctorCommand(stdout))
	if err := root.Execute(); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintln(stderr, "error:", err)
		}
		return 1
	}
	return 0
}
