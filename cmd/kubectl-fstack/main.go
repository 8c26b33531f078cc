// kubectl-fstack is kube-fstack's offline CLI, also usable as a kubectl plugin (`kubectl fstack`).
package main

import (
	"os"

	"github.com/kube-fstack/kube-fstack/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
