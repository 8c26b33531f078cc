package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// F-Stack's Nginx (spec.program mode Nginx) is one master, `nginx -c nginx.conf`, which forks
// worker i as F-Stack process i: worker 0 calls ff_init as the primary and the master waits
// for it (up to 15 s) before forking the others as secondaries. So the supervisor starts the
// master alone, and the processes it waits for, counts and watches are the master's workers:
// the primary by the runtime config's lock and magic and its telemetry, each secondary by its
// IPC socket and the primary's hugepages mapped. A dead worker ends the dataplane as a dead
// process does with any other program: the master would fork it again, but a primary cannot
// be restarted under running secondaries, and a secondary's restart is not F-Stack's contract.

// Nginx is what judging F-Stack's Nginx's command line needs.
type Nginx struct {
	// Argv is the container's command line for F-Stack's Nginx (--native's arguments).
	Argv []string
	// Build asks F-Stack's Nginx for its compiled-in paths (nginx -V) when Argv does not name
	// the configuration file absolutely.
	Build func(ctx context.Context, binary string) (nginxconf.Build, error)
	// Config is the rendered config.ini's path, which every worker's ff_init reads.
	Config string
	// Logf logs what was set on Nginx's command line for the stack.
	Logf func(msg string)
}

// Command judges the configuration the master will read and returns the command line it runs
// with (the original plus the -g directives the stack decides).
func (n Nginx) Command(ctx context.Context, res *render.Result) ([]string, error) {
	cmd, err := nginxconf.ParseCommand(n.Argv)
	if err != nil {
		return nil, fmt.Errorf("F-Stack's Nginx command %q: %w", n.Argv, err)
	}
	if cmd.NoServer != "" {
		return nil, fmt.Errorf("F-Stack's Nginx command %q runs no server (%s): spec.program mode Nginx needs the master, e.g. [nginx, -c, /etc/nginx/nginx.conf]", n.Argv, cmd.NoServer)
	}
	b := nginxconf.Build{}
	if !filepath.IsAbs(cmd.Conf) {
		if b, err = n.Build(ctx, n.Argv[0]); err != nil {
			return nil, fmt.Errorf("find the configuration file F-Stack's Nginx will read: %w", err)
		}
	}
	conf := cmd.ConfFile(b)
	file, err := nginxconf.ReadFile(conf, nginxconf.DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("read F-Stack's Nginx configuration: %w", err)
	}
	globals, err := nginxconf.ParseString("nginx -g", cmd.Globals)
	if err != nil {
		return nil, err
	}
	cpus, err := EALCPUs(res)
	if err != nil {
		return nil, err
	}
	plan := nginxconf.CheckFStack(append(globals, file...), nginxconf.FStack{
		Processes: len(res.EAL), Config: n.Config, ConfDir: filepath.Dir(conf), CPUs: cpus,
		Env: envNames(res)})
	if len(plan.Refusals) > 0 {
		return nil, fmt.Errorf("F-Stack's Nginx cannot run this stack with %s:\n  %s", conf, strings.Join(plan.Refusals, "\n  "))
	}
	for _, f := range plan.FixUps {
		n.Logf("nginx: set " + f)
	}
	return cmd.WithGlobals(strings.Join(plan.Globals, " ")), nil
}

// EALCPUs are the CPUs of the rendered processes, process k's at k (its EAL -c mask, or
// --lcores=<lcore>@<CPU> when lcores share CPUs).
func EALCPUs(res *render.Result) ([]int, error) {
	cpus := make([]int, len(res.EAL))
	for k, eal := range res.EAL {
		i := slices.IndexFunc(eal, func(a string) bool { _, ok, _ := render.EALCPU(a); return ok })
		if i < 0 {
			return nil, fmt.Errorf("process %d: the rendered EAL argv has no -c or --lcores", k)
		}
		cpu, _, err := render.EALCPU(eal[i])
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", k, err)
		}
		cpus[k] = cpu
	}
	return cpus, nil
}

// envNames are the names of res.FStackEnv, for F-Stack's Nginx's env directives (the workers
// keep the master's environment only for the names it lists).
func envNames(res *render.Result) []string {
	var names []string
	for _, e := range res.FStackEnv {
		names = append(names, e.Name)
	}
	return names
}

// Master is the F-Stack's Nginx of one generation: its master and the workers counted so far,
// worker i at i (host PIDs).
type Master struct {
	PID     int
	Workers []int
}

// FirstWorker counts worker 0 once the master has forked it: forked first, and alone until it
// has finished ff_init.
func (m *Master) FirstWorker() error {
	kids := ChildrenOf(m.PID)
	if len(kids) == 0 {
		return errors.New("the master has forked no worker")
	}
	m.Workers = kids[:1]
	return nil
}

// NextWorker counts worker k: the earliest-forked child of the master not yet counted for which
// joined passes (a DPDK secondary joined to the primary; a cache manager, never an F-Stack
// process, does not). The error is the last reason none did.
func (m *Master) NextWorker(k int, joined func(pid int) error) error {
	last := fmt.Errorf("the master has forked no worker %d yet", k)
	for _, pid := range ChildrenOf(m.PID) {
		if slices.Contains(m.Workers, pid) {
			continue
		}
		if last = joined(pid); last == nil {
			m.Workers = append(m.Workers, pid)
			return nil
		}
	}
	return last
}

// Watch calls gone, once, with why when a worker is gone (or a zombie its master has not
// reaped yet), looking every interval until ctx ends (nil-safe).
func (m *Master) Watch(ctx context.Context, every time.Duration, gone func(why string)) {
	if m == nil {
		return
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for k, pid := range m.Workers {
				if state, ppid, _ := procStat(pid); state == 0 || state == 'Z' || ppid != m.PID {
					gone(fmt.Sprintf("F-Stack process %d (%s, nginx worker pid %d) exited; F-Stack's Nginx master would fork it again, but a DPDK process restarted under a running dataplane is not F-Stack's contract (a new primary strands every secondary), so the whole dataplane stops", k, render.ProcType(k), pid))
					return
				}
			}
		}
	}()
}

// KillGroup ends whatever the master left (its process group: the workers inherit it;
// nil-safe).
func (m *Master) KillGroup() {
	if m != nil {
		_ = syscall.Kill(-m.PID, syscall.SIGKILL)
	}
}

// ChildrenOf are the processes whose parent is ppid, oldest first (by start time).
func ChildrenOf(ppid int) []int {
	entries, _ := os.ReadDir("/proc")
	type kid struct{ pid, start int }
	var kids []kid
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, parent, start := procStat(pid); state != 0 && state != 'Z' && parent == ppid {
			kids = append(kids, kid{pid, start})
		}
	}
	slices.SortFunc(kids, func(a, b kid) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return a.pid - b.pid
	})
	out := make([]int, len(kids))
	for i, k := range kids {
		out[i] = k.pid
	}
	return out
}

// procStat reads a process's state, parent and start time (clock ticks) from /proc/<pid>/stat;
// state 0: no such process.
func procStat(pid int) (state byte, ppid, start int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0
	}
	// The command name is in parentheses and may hold anything: the fields follow the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	start, _ = strconv.Atoi(f[19])
	return f[0][0], ppid, start
}
