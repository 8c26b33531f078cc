// Package program is the stand-in image's program mode: the supervisor runs a plain DPDK
// program (testpmd) as every F-Stack process, with the EAL argv the renderer builds for F-Stack
// (F-Stack's dpdk_args_setup, as the image's patches change it), so that CI, which cannot run
// F-Stack, still exercises the real supervisor with the real DPDK multi-process start. Only the
// stand-in's main (dataplane-image/standin/cmd/fstack-supervisor) links it, as
// supervisor.Launch.Programs; the product's binary has neither the code nor its flags.
package program

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// Program runs Program (and SecondaryProgram) as the F-Stack processes.
type Program struct {
	Program          string
	SecondaryProgram string // empty: Program
	// PrimaryArgs and SecondaryArgs are the program's own arguments, after "--". {proc} and
	// {procs} expand to the process index and count.
	PrimaryArgs, SecondaryArgs []string
	// LcoresPerProc > 1 replaces F-Stack's -c<one CPU> with that many lcores all pinned on that
	// same CPU (--lcores=0@c,1@c): testpmd wants a forwarding lcore besides its main one.
	LcoresPerProc int
	// PCI, when set, replaces the PCI devices DPDK cannot probe here (pci.go).
	PCI *PCIStandin
}

// Plan decides the PCI substitutions of a generation from its primary's argv.
func (p *Program) Plan(res *render.Result, warn func(string)) {
	if p.PCI != nil && len(res.EAL) > 0 {
		p.PCI.Plan(res.EAL[0], func(format string, args ...any) { warn(fmt.Sprintf(format, args...)) })
	}
}

// Argv is process k's command line: the program, the renderer's EAL argv, then "--" and the
// program's own arguments.
func (p *Program) Argv(res *render.Result, k int) ([]string, error) {
	if k < 0 || k >= len(res.EAL) {
		return nil, fmt.Errorf("process %d: the rendered config has %d processes", k, len(res.EAL))
	}
	prog, trailing := p.Program, p.PrimaryArgs
	if k > 0 {
		trailing = p.SecondaryArgs
		if p.SecondaryProgram != "" {
			prog = p.SecondaryProgram
		}
	}
	eal, err := p.eal(res.EAL[k])
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", k, err)
	}
	argv := append([]string{prog}, eal...)
	if len(trailing) > 0 {
		argv = append(argv, "--")
		for _, a := range trailing {
			a = strings.ReplaceAll(a, "{proc}", strconv.Itoa(k))
			argv = append(argv, strings.ReplaceAll(a, "{procs}", strconv.Itoa(len(res.EAL))))
		}
	}
	return argv, nil
}

// eal is F-Stack's EAL argv without argv[0], with the one substitution LcoresPerProc asks for
// (of -c, or of patch 0003's --lcores=<lcore>@<CPU> when lcores share CPUs: the CPU is kept).
func (p *Program) eal(argv []string) ([]string, error) {
	out := make([]string, 0, len(argv))
	for _, a := range argv[1:] {
		if cpu, isLcore, err := render.EALCPU(a); p.LcoresPerProc > 1 && isLcore {
			if err != nil {
				return nil, err
			}
			lc := make([]string, p.LcoresPerProc)
			for i := range lc {
				lc[i] = fmt.Sprintf("%d@%d", i, cpu)
			}
			a = "--lcores=" + strings.Join(lc, ",")
		}
		out = append(out, a)
	}
	if p.PCI != nil {
		out = p.PCI.Apply(out)
	}
	return out, nil
}
