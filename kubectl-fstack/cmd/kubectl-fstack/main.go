// kubectl-fstack is kube-fstack's offline CLI, also usable as a kubectl plugin (`kubectl fstack`).
// Linked as kubectl_complete-fstack it answers kubectl's shell completion for the plugin.
package main

import (
	"os"

	"github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli"
)

func main() {
	os.Exit(cli.Run(cli.CompletionArgs(os.Args[0], os.Args[1:]), os.Stdout, os.Stderr))
}
