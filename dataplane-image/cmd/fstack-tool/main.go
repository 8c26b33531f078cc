// fstack-tool runs an F-Stack tool in a container: installed as ff_netstat, ff_top, ff_traffic
// and every other tool the image ships (links to this program), it runs the tool of its name
// on a CPU of the container's cpuset, one tool at a time (package fftool says why). Also
// `fstack-tool ff_netstat -an`.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/fftool"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Where the image keeps things; tests build the program with others (-ldflags -X).
var (
	toolDir = fftool.Dir
	lockDir = podcontract.DPDKRuntimeDir
	shimDir = podcontract.ShimDir
)

func main() {
	if err := run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "fstack-tool:", err)
		os.Exit(2)
	}
}

func run(argv []string) error {
	name, args := filepath.Base(argv[0]), argv[1:]
	if name == "fstack-tool" {
		if len(args) == 0 {
			return fmt.Errorf("usage: fstack-tool ff_<tool> [ARGS...] (or run it as ff_<tool>); the tools are in %s", toolDir)
		}
		name, args = args[0], args[1:]
	}
	bin, err := fftool.Binary(toolDir, name)
	if err != nil {
		return err
	}
	cpus, err := fftool.Affinity()
	if err != nil {
		return err
	}
	// The lcores' CPUs, where the supervisor recorded them: a tool on another CPU does not
	// take turns with a polling lcore. Unreadable, the tool runs on the lowest CPU.
	p, _ := podcontract.ReadPlacement(shimDir) // nil when missing or refused
	cpu, err := fftool.PickCPU(cpus, p)
	if err != nil {
		return err
	}
	if _, err := fftool.Lock(lockDir, fftool.DefaultWait); err != nil {
		return err
	}
	// The lock's descriptor is inherited by the tool and released when it exits.
	return syscall.Exec(bin, append([]string{name}, args...), fftool.Env(os.Environ(), cpu))
}
