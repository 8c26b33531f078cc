package nginxconf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Shim is what the launcher knows of the pod: the F-Stack instances serving it
// (FF_NB_FSTACK_INSTANCE) and the CPUs of the app container.
type Shim struct {
	Instances int
	CPUs      []int
}

// MaxContexts is the shim's context slots per F-Stack instance (SOCKET_OPS_CONTEXT_MAX_NUM).
const MaxContexts = 32

// Plan is the verdict on a configuration: refusals, warnings, and the directives the launcher
// adds with -g (with a line each saying why).
type Plan struct {
	Refusals []string
	Warnings []string
	FixUps   []string
	Globals  []string
	// Workers is the number of worker processes nginx will start.
	Workers int
	// Exclusive are the listens a second nginx cannot open while this one runs (an address none
	// of whose listens has reuseport, a unix socket), as "file:line: listen": a reload that
	// starts the new nginx beside the old one needs none, in either configuration.
	Exclusive []string
}

func (p *Plan) refuse(d *Directive, format string, args ...any) {
	p.Refusals = append(p.Refusals, fmt.Sprintf("%s: %q: ", d.Where(), d.String())+fmt.Sprintf(format, args...))
}

func (p *Plan) warn(d *Directive, format string, args ...any) {
	p.Warnings = append(p.Warnings, fmt.Sprintf("%s: %q: ", d.Where(), d.String())+fmt.Sprintf(format, args...))
}

// Check judges the main context (the -g directives first, then the file, as nginx reads them).
func Check(main []*Directive, shim Shim) *Plan {
	p := &Plan{}
	top := map[string]*Directive{}
	for _, d := range main {
		if _, seen := top[d.Name]; !seen {
			top[d.Name] = d
		}
	}
	p.checkWorkers(top["worker_processes"], shim)
	p.checkAffinity(top["worker_cpu_affinity"], shim)
	if top["daemon"] == nil {
		p.Globals = append(p.Globals, "daemon off;")
		p.FixUps = append(p.FixUps, "daemon off (the file does not set it): a daemonised nginx would leave the launcher, and the container, at once")
	}
	var events *Directive
	for _, d := range main {
		switch d.Name {
		case "events":
			events = d
		case "http", "stream", "mail":
			p.checkServers(d, shim)
		}
	}
	p.checkEvents(events)
	return p
}

// checkWorkers: the shim maps worker i to instance i mod N; fewer workers than instances leave
// instances whose connections nobody accepts.
func (p *Plan) checkWorkers(d *Directive, shim Shim) {
	n := shim.Instances
	if d == nil {
		p.Workers = n
		p.Globals = append(p.Globals, fmt.Sprintf("worker_processes %d;", n))
		p.FixUps = append(p.FixUps, fmt.Sprintf("worker_processes %d (the file does not set it; one worker per F-Stack instance, %s=%d)", n, podcontract.EnvShimInstances, n))
		return
	}
	if len(d.Args) != 1 {
		p.refuse(d, "worker_processes takes one value; write \"worker_processes %d;\"", n)
		return
	}
	if d.Args[0] == "auto" {
		p.refuse(d, "auto starts one worker per online CPU of the node (nginx counts the node's CPUs, not the container's cpuset), not one per F-Stack instance, and -g cannot override a directive the file sets; write \"worker_processes %d;\" (%s)", n, podcontract.EnvShimInstances)
		return
	}
	w, err := strconv.Atoi(d.Args[0])
	switch {
	case err != nil || w < 1:
		p.refuse(d, "not a number of workers; write \"worker_processes %d;\"", n)
	case w < n:
		p.refuse(d, "%d workers for %d F-Stack instances: worker i serves instance i mod %d, so connections the NIC hashes to the other instances are never accepted; write \"worker_processes %d;\"", w, n, n, n)
	case (w+n-1)/n+1 > MaxContexts:
		p.refuse(d, "%d workers need %d shim contexts per F-Stack instance (workers and the master), the shim has %d; write \"worker_processes %d;\"", w, (w+n-1)/n+1, MaxContexts, n)
	default:
		p.Workers = w
		if w%n != 0 {
			p.warn(d, "%d workers on %d F-Stack instances: worker i serves instance i mod %d, so the instances serve unequal numbers of workers; %d is the documented setting", w, n, n, n)
		}
	}
}

// checkAffinity: DPDK pins the thread that opens the first F-Stack socket (the master) to the
// FF_INITIAL_LCORE_ID CPU and the workers inherit it, so without worker_cpu_affinity every worker
// runs on that one CPU.
func (p *Plan) checkAffinity(d *Directive, shim Shim) {
	if d != nil {
		if len(d.Args) > 0 && d.Args[0] == "auto" && len(d.Args) == 1 {
			p.warn(d, "auto binds worker i to the node's i-th CPU, whatever the container's cpuset: a CPU outside it fails and leaves that worker on the master's CPU; remove the directive and the launcher binds each worker to a CPU of the container's cpuset (%s)", podcontract.JoinCPUs(shim.CPUs))
		}
		return
	}
	if p.Workers == 0 || len(shim.CPUs) == 0 {
		return
	}
	masks := make([]string, p.Workers)
	for i := range masks {
		masks[i] = "1" + strings.Repeat("0", shim.CPUs[i%len(shim.CPUs)])
	}
	p.Globals = append(p.Globals, "worker_cpu_affinity "+strings.Join(masks, " ")+";")
	fix := fmt.Sprintf("worker_cpu_affinity for %d workers on the container's CPUs %s (the file does not set it; without it every worker runs on the CPU DPDK pins the master to)", p.Workers, podcontract.JoinCPUs(shim.CPUs))
	if p.Workers > len(shim.CPUs) {
		fix += fmt.Sprintf("; %d workers share %d CPUs: give the container %d CPUs for one each", p.Workers, len(shim.CPUs), p.Workers)
	}
	p.FixUps = append(p.FixUps, fix)
}
