package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `make bench-cni` as the node tier runs it, with a handful of attachments per series and a
// few fault cycles: the script builds every plugin, runs the bench in a network namespace of its
// own, and every series, fstack-cni's included, makes its ADDs and DELs and is reported. It
// stopped running once fstack-cni required the pod's emptyDir beneath the kubelet root (its
// first ADD failed: "pod bench/p ... has no emptyDir volume fstack-vhost"), and nothing noticed.
// The figures of so short a run mean nothing; only that it runs to its end is checked.
func TestBenchScriptRuns(t *testing.T) {
	script, err := filepath.Abs("../../../hack/bench-cni.sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script, "-n", "3", "-cycles", "5").CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	for _, want := range []string{"fstack-cni / bridge (both with host-local):", "vsctl-cni --no-wait / fstack-cni (neither waits):",
		"fault run: 5 ADD/DEL cycles", "leaked: ports=0 links/directories=0 device-info files=0 IPAM leases=0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the bench's output has no %q:\n%s", want, out)
		}
	}
}
