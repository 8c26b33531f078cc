package nginxconf

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// FStack is what the supervisor knows when F-Stack's own Nginx (app/nginx-* in F-Stack's tree,
// linked with libfstack) is the dataplane, a StackInstance's spec.program mode Nginx: its master
// forks worker i as F-Stack process i (ff_mod_init(fstack_conf, i, primary iff i == 0)), and
// ff_init pins that process to the i-th CPU of the container's cpuset.
type FStack struct {
	// Processes is the StackInstance's spec.processes.
	Processes int
	// Config is the config.ini the supervisor rendered.
	Config string
	// ConfDir is the directory of nginx's configuration file, against which nginx resolves a
	// relative fstack_conf.
	ConfDir string
	// CPUs are the processes' CPUs: process k runs on CPUs[k] (several share one with the lab
	// option spec.dpdk.lcoresPerCPU).
	CPUs []int
	// Env names the supervisor's variables every worker needs (render.Result.FStackEnv): nginx
	// replaces a worker's environment by what env directives keep, before ff_mod_init.
	Env []string
}

// CheckFStack judges the main context (the -g directives first, then the file, as nginx reads
// them) for F-Stack's Nginx: what the stack decides (worker_processes, fstack_conf) is added
// when the file leaves it out and refused when it says otherwise, and nothing may move a
// worker off the CPU ff_init pinned it to or take the master out of the foreground.
func CheckFStack(main []*Directive, f FStack) *Plan {
	p := &Plan{Workers: f.Processes}
	top := map[string]*Directive{}
	for _, d := range main {
		if _, seen := top[d.Name]; !seen {
			top[d.Name] = d
		}
	}
	p.fstackWorkers(top["worker_processes"], f)
	p.fstackConf(top["fstack_conf"], f)
	p.fstackAffinity(top["worker_cpu_affinity"], f)
	for _, name := range f.Env {
		p.Globals = append(p.Globals, "env "+name+";")
		p.FixUps = append(p.FixUps, "env "+name+" (the supervisor's, for F-Stack in every worker: nginx clears a worker's environment but for env directives)")
	}
	switch d := top["daemon"]; {
	case d == nil:
		p.Globals = append(p.Globals, "daemon off;")
		p.FixUps = append(p.FixUps, "daemon off (the file does not set it): a daemonised master would leave the supervisor, and the container, at once")
	case !isOff(d):
		p.refuse(d, "a daemonised master leaves the supervisor at once and the container ends; write \"daemon off;\" or remove it")
	}
	switch d := top["user"]; {
	case d == nil:
		// A master running as root starts its workers as nobody unless told otherwise.
		p.Globals = append(p.Globals, "user root;")
		p.FixUps = append(p.FixUps, "user root (the file does not set it): the workers are DPDK processes, and DPDK keeps its runtime directory at /var/run/dpdk, where the supervisor and F-Stack's tools look, only for root")
	case len(d.Args) == 0 || d.Args[0] != "root":
		p.refuse(d, "the workers are DPDK processes, and DPDK keeps its runtime directory at /var/run/dpdk, where the supervisor and F-Stack's tools look, only for root (F-Stack's own nginx.conf: \"root account is necessary\"); write \"user root;\" or remove it")
	}
	if d := top["master_process"]; d != nil && isOff(d) {
		p.refuse(d, "without a master nginx forks no workers, and F-Stack's Nginx makes its workers the F-Stack processes; remove it")
	}
	if f.Processes > 1 {
		p.fstackReuseport(main, f.Processes)
	}
	return p
}

// fstackReuseport refuses reuseport on a listen when there are several workers. Each worker of
// F-Stack's Nginx opens every listening socket in its own stack after ff_mod_init, the reuseport
// clones of the other workers included, and polls only its own; F-Stack's stack hands a
// connection to the first clone of the address, so in every worker but worker 0 the
// connections land on a socket nobody accepts from (seen on F-Stack v1.25 with 2 workers:
// worker 1 completed the handshakes and acked the requests, and they sat in CLOSE_WAIT, unread).
// Without reuseport every worker opens and polls the one socket in its own stack, which is all
// that reuseport gives nginx on the kernel: RSS already spreads the connections over the stacks.
func (p *Plan) fstackReuseport(dirs []*Directive, processes int) {
	for _, d := range dirs {
		if d.Name == "listen" && len(d.Args) > 1 && hasArg(d.Args[1:], "reuseport") {
			p.refuse(d, "with %d F-Stack processes each worker of F-Stack's Nginx opens every reuseport clone in its own stack and accepts from its own only, so the connections of all workers but the first are never accepted; remove reuseport (each worker already has its own stack, and RSS spreads connections over them)", processes)
		}
		if d.IsBlock && !dataBlocks[d.Name] {
			p.fstackReuseport(d.Block, processes)
		}
	}
}

func isOff(d *Directive) bool { return len(d.Args) == 1 && d.Args[0] == "off" }

// fstackWorkers: worker i is F-Stack process i, so there are exactly spec.processes of them; a
// worker beyond them fails ff_init (its proc_id has no lcore), too few leave processes whose
// queues nobody polls.
func (p *Plan) fstackWorkers(d *Directive, f FStack) {
	n := f.Processes
	if d == nil {
		p.Globals = append(p.Globals, fmt.Sprintf("worker_processes %d;", n))
		p.FixUps = append(p.FixUps, fmt.Sprintf("worker_processes %d (the file does not set it; worker i is F-Stack process i)", n))
		return
	}
	if w, err := strconv.Atoi(strings.Join(d.Args, " ")); err != nil || w != n {
		p.refuse(d, "F-Stack's Nginx runs worker i as F-Stack process i, and the StackInstance has %d (spec.processes); write \"worker_processes %d;\" or remove it (the supervisor then sets it)", n, n)
	}
}

// fstackConf: every worker reads the config.ini the supervisor rendered for this pod.
func (p *Plan) fstackConf(d *Directive, f FStack) {
	if d == nil {
		p.Globals = append(p.Globals, fmt.Sprintf("fstack_conf %s;", f.Config))
		p.FixUps = append(p.FixUps, fmt.Sprintf("fstack_conf %s (the file does not set it; the config.ini rendered from the StackInstance and this pod's CPUs and devices)", f.Config))
		return
	}
	path := ""
	if len(d.Args) == 1 {
		path = d.Args[0]
		if !filepath.IsAbs(path) {
			path = filepath.Join(f.ConfDir, path)
		}
	}
	if filepath.Clean(path) != filepath.Clean(f.Config) {
		p.refuse(d, "the supervisor renders config.ini at %s from the StackInstance and this pod's CPUs and devices; remove fstack_conf (the supervisor sets it) or write \"fstack_conf %s;\"", f.Config, f.Config)
	}
}

// fstackAffinity: ff_init pins process i to its lcore, the i-th CPU of the container; nginx
// applies worker_cpu_affinity just before ff_init, so a different mask only misleads.
func (p *Plan) fstackAffinity(d *Directive, f FStack) {
	if d == nil {
		return
	}
	want := make([]string, f.Processes)
	for i := range want {
		if i < len(f.CPUs) {
			want[i] = "1" + strings.Repeat("0", f.CPUs[i])
		}
	}
	if !sameMasks(d.Args, want) {
		p.refuse(d, "ff_init pins worker i to the i-th CPU of the container's cpuset (%s); remove worker_cpu_affinity, or write \"worker_cpu_affinity %s;\"", podcontract.JoinCPUs(f.CPUs), strings.Join(want, " "))
	}
}

// sameMasks compares nginx's binary CPU masks, leading zeros aside.
func sameMasks(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if strings.TrimLeft(got[i], "0") != want[i] || strings.Trim(got[i], "01") != "" {
			return false
		}
	}
	return true
}
