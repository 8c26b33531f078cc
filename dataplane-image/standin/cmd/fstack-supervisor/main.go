// fstack-supervisor, as the stand-in image builds it: the product's supervisor (package cli,
// the same code the real image runs) with the stand-in's program mode added through the
// supervisor's seam. CI cannot run F-Stack, so this build starts a plain DPDK program (testpmd)
// as every F-Stack process with the EAL argv F-Stack would build (standin/program), replaces
// PCI devices DPDK cannot probe here by virtual ones (the e2e suite's device plugin hands out
// addresses of no device), and counts the stand-in shim's contexts in its slot files
// (standin/slots). hack/image-dataplane-standin.sh builds it as the stand-in image's
// /usr/local/bin/fstack-supervisor; the product's main links none of this.
package main

import (
	"errors"
	"flag"
	"os"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/cli"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/program"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/slots"
)

// standin is the stand-in's cli.Extension.
type standin struct {
	programMode   bool
	prog          program.Program
	pciVdev       string
	contextsDelay time.Duration
}

func (s *standin) Flags(fs *flag.FlagSet) {
	p := &s.prog
	fs.BoolVar(&s.programMode, "program-mode", false, "stand-in: run --program with the rendered EAL argv instead of F-Stack")
	fs.StringVar(&p.Program, "program", "", "program mode: the DPDK program run as every process")
	fs.StringVar(&p.SecondaryProgram, "secondary-program", "", "program mode: another program for processes 1..n-1")
	fs.Var((*cli.ListFlag)(&p.PrimaryArgs), "primary-args", "program mode: an argument after -- for process 0 (repeat; {proc} and {procs} expand)")
	fs.Var((*cli.ListFlag)(&p.SecondaryArgs), "secondary-args", "program mode: an argument after -- for processes 1..n-1 (repeat)")
	fs.IntVar(&p.LcoresPerProc, "program-lcores-per-proc", 1, "program mode: replace -c<cpu> by this many lcores pinned on that CPU")
	fs.StringVar(&s.pciVdev, "standin-pci-vdev", "", "program mode: replace each allowed PCI device DPDK cannot probe here (no such device, or not bound to vfio-pci/uio) by a virtual device of this DPDK driver, e.g. net_null, and log it")
	fs.DurationVar(&s.contextsDelay, "standin-contexts-delay", 100*time.Millisecond, "with --shim-contexts="+slots.Kind+" (the stand-in shim's slot files): how long after a generation's first process is up its slot files appear (F-Stack v1.25 with patch 0004 has its zones when its process is up; the stand-in keeps a short gap so that readers meet files not there yet)")
}

func (s *standin) Configure(cfg *supervisor.Config) error {
	cfg.ContextKinds = map[string]func(string, string) contexts.ContextSource{slots.Kind: slots.Maker(s.contextsDelay)}
	if s.pciVdev != "" {
		if !s.programMode {
			// F-Stack reads its devices from config.ini: a substitution would be a lie there.
			return errors.New("--standin-pci-vdev needs --program-mode: only testpmd started by the stand-in gets a replaced device")
		}
		s.prog.PCI = &program.PCIStandin{Driver: s.pciVdev, SysfsDevices: "/sys/bus/pci/devices"}
	}
	if !s.programMode {
		return nil
	}
	if s.prog.Program == "" {
		return errors.New("--program-mode needs --program")
	}
	if cfg.Launch.Native != "" {
		return errors.New("--native and --program-mode are two ways to start the processes: give one")
	}
	cfg.Launch.Programs = &s.prog
	return nil
}

func main() {
	os.Exit(cli.Main(os.Args[1:], &standin{}))
}
