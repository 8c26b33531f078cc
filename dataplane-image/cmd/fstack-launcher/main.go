// fstack-launcher starts an app container's command against the pod's F-Stack dataplane (see
// dataplane-image/internal/launcher). The injection makes it the command of every app container
// that uses the shim: `fstack-launcher -- <original command>`. The dataplane image carries it and
// the supervisor copies it into the shim volume; built static, since it runs in app images it
// knows nothing about.
package main

import (
	"context"
	"os"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/launcher"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	os.Exit(launcher.New().Run(context.Background(), args))
}
