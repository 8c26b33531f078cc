package supervisor

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

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/readiness"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
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

// nginxMaster is the F-Stack's Nginx of one generation.
type nginxMaster struct {
	master  *child
	workers []int // host PIDs, worker i at i
}

// prepareNginx judges the configuration the master will read and returns the command line
// it runs with (the original plus the -g directives the stack decides).
func (s *Supervisor) prepareNginx(res *render.Result) ([]string, error) {
	l := &s.Cfg.Launch
	cmd, err := nginxconf.ParseCommand(l.NativeArgv)
	if err != nil {
		return nil, fmt.Errorf("F-Stack's Nginx command %q: %w", l.NativeArgv, err)
	}
	if cmd.NoServer != "" {
		return nil, fmt.Errorf("F-Stack's Nginx command %q runs no server (%s): spec.program mode Nginx needs the master, e.g. [nginx, -c, /etc/nginx/nginx.conf]", l.NativeArgv, cmd.NoServer)
	}
	build := l.NginxBuild
	if build == nil {
		build = func(ctx context.Context, bin string) (nginxconf.Build, error) {
			return nginxconf.QueryBuild(ctx, bin, s.childEnv())
		}
	}
	b := nginxconf.Build{}
	if !filepath.IsAbs(cmd.Conf) {
		if b, err = build(context.Background(), l.NativeArgv[0]); err != nil {
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
	cpus, err := ealCPUs(res)
	if err != nil {
		return nil, err
	}
	plan := nginxconf.CheckFStack(append(globals, file...), nginxconf.FStack{
		Processes: len(res.EAL), Config: s.Cfg.Paths.ConfigFile, ConfDir: filepath.Dir(conf), CPUs: cpus,
		Env: fstackEnvNames(res)})
	if len(plan.Refusals) > 0 {
		return nil, fmt.Errorf("F-Stack's Nginx cannot run this stack with %s:\n  %s", conf, strings.Join(plan.Refusals, "\n  "))
	}
	for _, f := range plan.FixUps {
		s.log.Info("nginx: set " + f)
	}
	return cmd.WithGlobals(strings.Join(plan.Globals, " ")), nil
}

// ealCPUs are the CPUs of the rendered processes, process k's at k (its EAL -c mask, or
// --lcores=<lcore>@<CPU> when lcores share CPUs).
func ealCPUs(res *render.Result) ([]int, error) {
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

// startNginx starts the master and waits for its workers in F-Stack's order: the primary
// ready, then each secondary joined. g.procs holds the master only; g.nginx is set once every
// worker is up.
func (s *Supervisor) startNginx(g *generation) error {
	res, prefix := g.res, g.prefix
	argv, err := s.prepareNginx(res)
	if err != nil {
		return err
	}
	s.log.Info("starting F-Stack's Nginx master", "argv", strings.Join(argv, " "))
	// The master's output is its workers' too (they inherit it): it is Nginx's, not process 0's.
	c, err := startChild(0, argv, s.fstackEnv(res), s.log.With(logging.KeyProgram, "nginx"), g.end)
	if err != nil {
		return err
	}
	g.procs = []*child{c}
	ng := &nginxMaster{master: c}
	s.primaryPID.Store(int64(c.cmd.Process.Pid))
	primary := s.readyCheck(prefix, portIDs(res), c)
	if err := waitUntil(g.ctx, "worker 0 (the primary): "+s.readyWhat(0), c, s.Cfg.Timing, func() error {
		if err := primary(); err != nil {
			return err
		}
		kids := childrenOf(c.cmd.Process.Pid)
		if len(kids) == 0 {
			return errors.New("the master has forked no worker")
		}
		ng.workers = kids[:1] // forked first, and alone until it has finished ff_init
		return nil
	}); err != nil {
		return err
	}
	s.workerUp(0, ng.workers[0])
	for k := 1; k < len(res.EAL); k++ {
		if err := waitUntil(g.ctx, fmt.Sprintf("worker %d: %s", k, s.readyWhat(k)), c, s.Cfg.Timing, func() error {
			return s.nextWorker(ng, prefix, k)
		}); err != nil {
			return err
		}
		s.workerUp(k, ng.workers[k])
	}
	g.nginx = ng
	return nil
}

func (s *Supervisor) workerUp(k, pid int) {
	s.metrics.Starts.WithLabelValues(fmt.Sprint(k)).Inc()
	s.metrics.ProcessUp(k)
	s.log.Info("process is up (an nginx worker)", logging.KeyProcess, k, logging.KeyPID, pid)
}

// nextWorker finds worker k: the earliest-forked child of the master not yet counted that has
// joined the primary as a DPDK secondary (a cache manager, never an F-Stack process, does not).
func (s *Supervisor) nextWorker(ng *nginxMaster, prefix string, k int) error {
	last := fmt.Errorf("the master has forked no worker %d yet", k)
	for _, pid := range childrenOf(ng.master.cmd.Process.Pid) {
		if slices.Contains(ng.workers, pid) {
			continue
		}
		if last = readiness.SecondaryJoined(s.Cfg.Paths.RuntimeDir, s.hugeDirIfUsed(), prefix, pid); last == nil {
			if err := readiness.ReadyCommand(context.Background(), s.Cfg.ReadyCommand, k); err != nil {
				return err
			}
			ng.workers = append(ng.workers, pid)
			return nil
		}
	}
	return last
}

// watchWorkers ends the generation when a worker is gone (or a zombie its master has not
// reaped yet), an inPlaceError naming it the cause; it ends with the generation (nil-safe).
func (ng *nginxMaster) watchWorkers(g *generation, every time.Duration) {
	if ng == nil {
		return
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-g.ctx.Done():
				return
			case <-t.C:
			}
			for k, pid := range ng.workers {
				if state, ppid := procState(pid); state == 0 || state == 'Z' || ppid != ng.master.cmd.Process.Pid {
					g.end(&inPlaceError{reason: podcontract.DataplaneRestartProcessExit, msg: fmt.Sprintf("F-Stack process %d (%s, nginx worker pid %d) exited; F-Stack's Nginx master would fork it again, but a DPDK process restarted under a running dataplane is not F-Stack's contract (a new primary strands every secondary), so the whole dataplane stops", k, procType(k), pid)})
					return
				}
			}
		}
	}()
}

// killGroup ends whatever the master left (its process group: the workers inherit it).
func (ng *nginxMaster) killGroup() {
	if ng != nil {
		_ = syscall.Kill(-ng.master.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// childrenOf are the processes whose parent is ppid, oldest first (by start time).
func childrenOf(ppid int) []int {
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

func procState(pid int) (state byte, ppid int) {
	state, ppid, _ = procStat(pid)
	return state, ppid
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

func isNginx(l *Launch) bool { return l.Native == fsv1.ProgramNginx }
