// fstack-launcher starts an app container's command against the pod's F-Stack dataplane (see
// dataplane-image/internal/launcher). The injection makes it the command of every app container
// that uses the shim: `fstack-launcher -- <original command>`. The dataplane image carries it and
// the supervisor copies it into the shim volume; built static, since it runs in app images it
// knows nothing about. Its own flags, --log-format and --log-level (or their variables, which
// the injection sets) and the restart budget, come before the "--".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/launcher"
)

func main() {
	l := launcher.New()
	args, err := parseArgs(l, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fstack-launcher:", err)
		os.Exit(launcher.ExitConfig)
	}
	os.Exit(l.Run(context.Background(), args))
}

// parseArgs reads the launcher's own flags and returns the app's command: what follows "--",
// or the first argument that is not a flag.
func parseArgs(l *launcher.Launcher, args []string) ([]string, error) {
	fs := flag.NewFlagSet("fstack-launcher", flag.ContinueOnError)
	l.Logging.BindFlags(fs)
	fs.IntVar(&l.MaxRestarts, "max-restarts", l.MaxRestarts, "restarts of the app in place for its own failures (it exited, could not serve) allowed within --restart-window; one more exits, so that the kubelet restarts the container with its back-off; reloads and the dataplane's new generations restart it in place without counting; 0: no restart in place, exit on the first")
	fs.DurationVar(&l.RestartWindow, "restart-window", l.RestartWindow, "the window of --max-restarts")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if l.MaxRestarts < 0 || l.RestartWindow <= 0 {
		return nil, fmt.Errorf("--max-restarts=%d --restart-window=%s: want a count of 0 or more and a positive window", l.MaxRestarts, l.RestartWindow)
	}
	return fs.Args(), l.Logging.Check()
}
