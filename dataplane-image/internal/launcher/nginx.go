package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// ExitConfig is the exit code when the app's configuration would make the shim misbehave
// (EX_CONFIG).
const ExitConfig = 78

// app is what the launcher knows of the command it runs.
type app struct {
	// orig is the command as the container gives it; argv is what runs.
	orig  []string
	argv  []string
	nginx bool
	// need is the shim contexts per F-Stack instance the app will take.
	need []int
	// workers is how many workers nginx starts (workers.go watches them).
	workers int
	// pidFile is where nginx writes its master's pid (reload.go takes it over); "" unknown.
	pidFile string
	// exclusive are nginx's listens a second nginx cannot open beside it (overlap.go).
	exclusive []string
}

// prepareApp judges an Nginx command's configuration (docs/fstack-rules.md §6) and adds the -g fix-ups;
// any other command, and nginx -t/-T/-v/-V/-s, passes through untouched.
func (l *Launcher) prepareApp(ctx context.Context, argv []string) (*app, error) {
	n, err := l.instances()
	if err != nil {
		return nil, err
	}
	procID := podcontract.ShimProcID
	a := &app{orig: argv, argv: argv, need: make([]int, n)}
	for k := range a.need {
		a.need[k] = 1 // what any app's first F-Stack socket takes
	}
	if !nginxconf.IsNginx(argv[0]) {
		return a, nil
	}
	cpus, _, err := l.appCPUs()
	if err != nil {
		return nil, err
	}
	build := l.NginxBuild
	if build == nil {
		build = func(ctx context.Context, bin string) (nginxconf.Build, error) {
			return nginxconf.QueryBuild(ctx, bin, withoutPreload(os.Environ()))
		}
	}
	p, err := nginxconf.Prepare(ctx, argv, nginxconf.Shim{Instances: n, CPUs: cpus}, build)
	if err != nil || p == nil {
		return a, err
	}
	for _, w := range p.Plan.Warnings {
		l.log().Warn("nginx: " + w)
	}
	if len(p.Plan.Refusals) > 0 {
		return nil, &configError{conf: p.ConfFile, refusals: p.Plan.Refusals}
	}
	for _, f := range p.Plan.FixUps {
		l.log().Info("nginx: set " + f)
	}
	if len(p.Plan.Globals) > 0 {
		l.log().Info("nginx: running", "argv", fmt.Sprintf("%q", p.Argv))
	}
	a.argv, a.nginx, a.workers, a.pidFile, a.exclusive = p.Argv, true, p.Plan.Workers, p.PidFile, p.Plan.Exclusive
	// The master and worker i (on instance (FF_PROC_ID+i) mod N) each hold a context.
	for i := 0; i < p.Plan.Workers; i++ {
		a.need[(procID+i)%n]++
	}
	return a, nil
}

type configError struct {
	conf     string
	refusals []string
}

func (e *configError) Error() string {
	return fmt.Sprintf("nginx's configuration (%s) would make F-Stack's shim misbehave; not starting it:\n  %s",
		e.conf, strings.Join(e.refusals, "\n  "))
}

func withoutPreload(env []string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, podcontract.EnvPreload+"=") {
			out = append(out, e)
		}
	}
	return out
}

// stopNginx gives Nginx its graceful path first: SIGQUIT to the master (finish requests, close
// listeners, exit), then SIGTERM (fast shutdown), then SIGKILL to the whole process group, each
// step bounded. Under the shim workers often keep spinning after SIGQUIT, and every process
// killed leaks one of its instance's 32 shim contexts, so the log says what it took. It returns
// how Nginx stopped, for a reload's record.
func (l *Launcher) stopNginx(pid int, exited context.Context) string {
	return l.stopNginxIn(pid, exited, "nginx needed SIGKILL", stopStep{syscall.SIGQUIT, l.QuitGrace}, stopStep{syscall.SIGTERM, l.TermGrace})
}

// stopDeadNginx stops an Nginx with no worker up: SIGTERM, SIGKILL after DeadGrace.
func (l *Launcher) stopDeadNginx(pid int, exited context.Context) string {
	return l.stopNginxIn(pid, exited, "nginx with no worker up killed", stopStep{syscall.SIGTERM, l.DeadGrace})
}

// stopStep is a signal to Nginx's master and how long its process group gets to go.
type stopStep struct {
	sig   syscall.Signal
	bound time.Duration
}

// stopNginxIn sends each step's signal until the process group is gone, then SIGKILL to the
// group, which the log says with killed. A master already reaped gets no signal: its pid may
// be another process's by now (a reload's old Nginx can exit on its own).
func (l *Launcher) stopNginxIn(pid int, exited context.Context, killed string, steps ...stopStep) string {
	begin := time.Now()
	if exited.Err() != nil && len(groupMembers(pid)) == 0 {
		return "on its own"
	}
	for _, step := range steps {
		if exited.Err() == nil {
			_ = syscall.Kill(pid, step.sig)
		}
		if l.waitGroupGone(pid, exited, step.bound) {
			l.log().Info("nginx stopped", "signal", step.sig.String(), logging.KeyPID, pid, "elapsed", time.Since(begin).Round(time.Millisecond).String())
			return "on " + sigName(step.sig)
		}
		l.log().Warn("nginx still running", "after", step.bound.String(), "signal", step.sig.String(), logging.KeyPID, pid)
	}
	left := groupMembers(pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-exited.Done()
	l.log().Warn(killed+": each process killed held a shim context, which F-Stack gives back within a second (patch 0007)", "killed", len(left), "pids", fmt.Sprint(left))
	return "with SIGKILL"
}

// sigName is a signal's name as nginx's documentation writes it (SIGQUIT).
func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// waitGroupGone waits until the master has exited and no process of its group is left (workers
// may outlive their master), bounded.
func (l *Launcher) waitGroupGone(pgid int, exited context.Context, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for {
		select {
		case <-exited.Done():
			if len(groupMembers(pgid)) == 0 {
				return true
			}
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(l.Poll)
	}
}

// groupMembers lists the live (not zombie) processes of process group pgid.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// state ppid pgrp
		if len(f) >= 3 && f[0] != "Z" && f[0] != "X" && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}
