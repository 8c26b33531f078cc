// fstack-supervisor is the dataplane image's entrypoint (package cli says what it does). This
// main is the product's: it runs the supervisor with no extension, so F-Stack's fstack or the
// spec's native program are all it can start. The stand-in image builds its own main
// (dataplane-image/standin/cmd/fstack-supervisor), which adds testpmd's program mode.
package main

import (
	"os"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], nil))
}
