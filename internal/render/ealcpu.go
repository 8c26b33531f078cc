package render

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// EALCPU reads back the CPU an lcore argument of ealArgs pins a process to: -c<one-bit mask>
// (lcore = CPU) or patch 0003's --lcores=<lcore>@<CPU>; ok is false for any other argument. The
// supervisor places its helpers by it, and the stand-in image rewrites the argument by it for
// testpmd, so both read the renderer's own format in one place.
func EALCPU(arg string) (cpu int, ok bool, err error) {
	switch {
	case strings.HasPrefix(arg, "-c"):
		m, perr := strconv.ParseUint(strings.TrimPrefix(arg, "-c"), 16, 64)
		if perr != nil || bits.OnesCount64(m) != 1 {
			return 0, true, fmt.Errorf("EAL %s is not a one-CPU mask", arg)
		}
		return bits.TrailingZeros64(m), true, nil
	case strings.HasPrefix(arg, "--lcores="):
		lcore, c, found := strings.Cut(strings.TrimPrefix(arg, "--lcores="), "@")
		if _, e := strconv.Atoi(lcore); e != nil || !found {
			return 0, true, fmt.Errorf("EAL %s is not --lcores=<lcore>@<CPU>", arg)
		}
		if cpu, err = strconv.Atoi(c); err != nil || cpu < 0 {
			return 0, true, fmt.Errorf("EAL %s is not --lcores=<lcore>@<CPU>", arg)
		}
		return cpu, true, nil
	}
	return 0, false, nil
}
