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

// exitCodeError is an error with the exit status it gives, other than 1.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

// couldNotLook is err with exit status 2: a command that judges (doctor) could not look, so it
// found neither problems (exit status 1) nor none (0).
func couldNotLook(err error) error {
	if err == nil {
		return nil
	}
	return &exitCodeError{code: 2, err: err}
}

// exitCode is the exit status err gives: 0 for none, 1 unless it says otherwise.
func exitCode(err error) int {
	var ec *exitCodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		return ec.code
	}
	return 1
}

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
	root.AddCommand(newDoctorCommand(stdout, stderr), newBugReportCommand(stdout, stderr))
	root.AddCommand(newToolCommands(stdout, stderr)...)
	root.AddCommand(newVersionCommand(stdout, stderr))
	err := root.Execute()
	if err != nil && !errors.Is(err, errReported) {
		fmt.Fprintln(stderr, "error:", err)
	}
	return exitCode(err)
}
