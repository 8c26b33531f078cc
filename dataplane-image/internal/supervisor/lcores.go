package supervisor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// Lcores sharing CPUs (spec.dpdk.lcoresPerCPU, lab only): the renderer gives every F-Stack process
// the same environment (render.Result.FStackEnv, podcontract.EnvLcoreCPUs), from which the
// image's patch 0003 builds EAL --lcores=<lcore>@<CPU> instead of -c<lcore>. The app's probe agent
// and the ff_* tools never get it: they are no F-Stack process.

// fstackEnv is the environment of an F-Stack process (or of F-Stack's Nginx master, whose
// workers keep it through the env directive nginxconf.CheckFStack adds).
func (s *Supervisor) fstackEnv(res *render.Result) []string {
	env := s.childEnv()
	for _, e := range res.FStackEnv {
		env = append(env, e.Name+"="+e.Value)
	}
	return env
}

// fstackEnvNames are the names of res.FStackEnv, for F-Stack's Nginx's env directives.
func fstackEnvNames(res *render.Result) []string {
	var names []string
	for _, e := range res.FStackEnv {
		names = append(names, e.Name)
	}
	return names
}

// ealCPU is the CPU an EAL lcore argument of the renderer's argv pins a process to: -c<one-bit
// mask> (lcore = CPU) or patch 0003's --lcores=<lcore>@<CPU>; ok is false for any other argument.
func ealCPU(arg string) (cpu int, ok bool, err error) {
	switch {
	case strings.HasPrefix(arg, "-c"):
		cpu, err = singleCPU(strings.TrimPrefix(arg, "-c"))
		return cpu, true, err
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
