package supervisor

import (
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
