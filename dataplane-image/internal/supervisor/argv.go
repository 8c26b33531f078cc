package supervisor

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// DefaultPrefix is DPDK's default file prefix, the only one the shim and the ff_* tools know.
const DefaultPrefix = "rte"

// Argv is the command line of F-Stack process k.
func (l *Launch) Argv(res *render.Result, configFile string, k int) ([]string, error) {
	if k < 0 || k >= len(res.EAL) {
		return nil, fmt.Errorf("process %d: the rendered config has %d processes", k, len(res.EAL))
	}
	fstackArgs := []string{"--conf", configFile, "--proc-type=" + procType(k), "--proc-id=" + strconv.Itoa(k)}
	if l.Native != "" {
		// start.sh's order: the program's own arguments, then F-Stack's, which ff_init parses.
		return append(slices.Clone(l.NativeArgv), fstackArgs...), nil
	}
	if !l.ProgramMode {
		return append([]string{l.FStack}, fstackArgs...), nil
	}
	prog, trailing := l.Program, l.PrimaryArgs
	if k > 0 {
		trailing = l.SecondaryArgs
		if l.SecondaryProgram != "" {
			prog = l.SecondaryProgram
		}
	}
	eal, err := l.eal(res.EAL[k])
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
func (l *Launch) eal(argv []string) ([]string, error) {
	out := make([]string, 0, len(argv))
	for _, a := range argv[1:] {
		if cpu, isLcore, err := ealCPU(a); l.LcoresPerProc > 1 && isLcore {
			if err != nil {
				return nil, err
			}
			lc := make([]string, l.LcoresPerProc)
			for i := range lc {
				lc[i] = fmt.Sprintf("%d@%d", i, cpu)
			}
			a = "--lcores=" + strings.Join(lc, ",")
		}
		out = append(out, a)
	}
	if l.PCIStandin != nil {
		out = l.PCIStandin.Apply(out)
	}
	return out, nil
}

func singleCPU(hexMask string) (int, error) {
	m, err := strconv.ParseUint(hexMask, 16, 64)
	if err != nil || bits.OnesCount64(m) != 1 {
		return 0, fmt.Errorf("EAL -c%s is not a one-CPU mask", hexMask)
	}
	return bits.TrailingZeros64(m), nil
}

func procType(k int) string {
	if k == 0 {
		return "primary"
	}
	return "secondary"
}

// FilePrefix is the DPDK file prefix of the rendered EAL argv (the last --file-prefix wins, as
// in EAL's parser); DPDK's default otherwise.
func FilePrefix(eal []string) string {
	prefix := DefaultPrefix
	for i, a := range eal {
		switch {
		case strings.HasPrefix(a, "--file-prefix="):
			prefix = strings.TrimPrefix(a, "--file-prefix=")
		case a == "--file-prefix" && i+1 < len(eal):
			prefix = eal[i+1]
		}
	}
	return prefix
}
