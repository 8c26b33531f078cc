package nodetest

import (
	"fmt"
	"os/exec"
	"strings"
)

// Run runs a command and returns its combined output, with the output in the error.
func Run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// AddNetns creates a named network namespace with loopback up.
func AddNetns(name string) error {
	if _, err := Run("ip", "netns", "add", name); err != nil {
		return err
	}
	_, err := Run("ip", "-n", name, "link", "set", "lo", "up")
	return err
}

// DelNetns removes a named network namespace; a missing one is fine.
func DelNetns(name string) {
	_, _ = Run("ip", "netns", "del", name)
}

// NetnsPath is where iproute2 keeps the namespace handle, the form CNI_NETNS takes.
func NetnsPath(name string) string { return "/run/netns/" + name }
