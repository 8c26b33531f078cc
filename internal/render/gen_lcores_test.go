package render_test

import (
	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// How the generator spreads processes over CPUs and ports, up to the CRD's 64 processes and 16
// ports, in the shapes real stacks take: one port served by every process, a primary-only
// control port beside a data port, processes split between ports, arbitrary subsets.

// processes is spec.processes: mostly small, as stacks are, but across the whole range.
func (g *gen) processes() int32 {
	switch g.intn(4) {
	case 0:
		return int32(1 + g.intn(16))
	case 1:
		return int32(1 + g.intn(64))
	case 2:
		return []int32{1, 2, 4, 8, 16, 32, 64}[g.intn(7)]
	}
	return int32(1 + g.intn(4))
}

// cpus are the dataplane container's CPUs (consecutive, or every second CPU as with hyperthread
// siblings, all below RTE_MAX_LCORE 128) and the app's CPU, which the shim can name only up to 50.
func (g *gen) cpus(n int) {
	stride := 1
	if n <= 60 && g.intn(3) == 0 {
		stride = 2
	}
	cpu0 := 1 + g.intn(min(41, 128-stride*n-1))
	count := n + g.intn(2)
	if cpu0+stride*(count-1) >= 128 {
		count = n
	}
	for k := 0; k < count; k++ {
		g.facts.DataplaneCPUs = append(g.facts.DataplaneCPUs, cpu0+stride*k)
	}
	if g.wild && g.intn(8) == 0 {
		g.facts.DataplaneCPUs = g.facts.DataplaneCPUs[:g.intn(len(g.facts.DataplaneCPUs))]
	}
	app := cpu0 - 1
	if last := cpu0 + stride*(count-1); last+2 <= 50 && g.flip() {
		app = last + 2
	}
	g.facts.AppCPUs = []int{app}
}

// portCount stays where the EAL argv fits F-Stack's 17 arguments unless in wild mode.
func (g *gen) portCount() int {
	if g.wild && g.intn(4) == 0 {
		return 1 + g.intn(16)
	}
	return 1 + g.intn(6)
}

// servePorts says which processes serve each port; every process serves at least one.
func (g *gen) servePorts() {
	ports, n := g.spec.Ports, int(g.spec.Processes)
	switch g.intn(4) {
	case 1: // port 0 is served by all, the others by a subset (often the primary alone)
		for i := 1; i < len(ports); i++ {
			ports[i].Processes = g.subset(n)
		}
	case 2: // processes split round-robin between the ports
		for i := range ports {
			ports[i].Processes = nil
			for k := i % n; k < n; k += len(ports) {
				ports[i].Processes = append(ports[i].Processes, int32(k))
			}
			if ports[i].Processes == nil {
				ports[i].Processes = []int32{int32(i % n)}
			}
		}
	case 3: // every port by all, listed explicitly and unsorted
		for i := range ports {
			for k := n - 1; k >= 0; k-- {
				ports[i].Processes = append(ports[i].Processes, int32(k))
			}
		}
	}
	if g.wild && g.intn(8) == 0 {
		ports[0].Processes = append(ports[0].Processes, int32(n+g.intn(3)))
	}
	for i := range ports {
		g.sizeQueues(&ports[i])
	}
}

// subset is a non-empty set of process indices below n.
func (g *gen) subset(n int) []int32 {
	if g.flip() {
		return []int32{0}
	}
	var out []int32
	for k := 0; k < n; k++ {
		if g.flip() {
			out = append(out, int32(k))
		}
	}
	if out == nil {
		out = []int32{int32(g.intn(n))}
	}
	return out
}

// sizeQueues gives a vhost-user port a queue pair per process serving it, sometimes one more.
func (g *gen) sizeQueues(p *fsv1.PortSpec) {
	vu := p.Device.VhostUser
	if vu == nil || g.flip() {
		return
	}
	serving := len(p.Processes)
	if serving == 0 {
		serving = int(g.spec.Processes)
	}
	vu.Queues = int32(serving + g.intn(2))
	if g.wild && g.intn(8) == 0 {
		vu.Queues = int32(serving - 1)
	}
}
