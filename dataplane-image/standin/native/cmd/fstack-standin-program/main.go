// fstack-standin-program stands in, in the stand-in image, for a program linked with libfstack
// (F-Stack's example/helloworld): started as F-Stack's start.sh starts one, `<program>
// [own args] --conf <config.ini> --proc-type=<primary|secondary> --proc-id=<k>`, it becomes
// DPDK's testpmd with the EAL arguments F-Stack would build for that process (package native).
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/native"
)

const testpmd = "/usr/bin/dpdk-testpmd"

func main() {
	a, err := native.ParseArgs(os.Args[1:])
	if err == nil {
		var argv []string
		if argv, err = native.Testpmd(testpmd, a.WithLcoreCPUs(os.LookupEnv)); err == nil {
			fmt.Printf("stand-in F-Stack program (not F-Stack): process %d as %s\n", a.ProcID, strings.Join(argv, " "))
			// exec, not a child: the supervisor watches this PID as the F-Stack process.
			err = syscall.Exec(argv[0], argv, os.Environ())
		}
	}
	fmt.Fprintln(os.Stderr, "fstack-standin-program:", err)
	os.Exit(1)
}
