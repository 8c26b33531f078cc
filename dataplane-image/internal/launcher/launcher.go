// Package launcher starts an app container's command against the pod's F-Stack dataplane. It is
// the app side of the pod contract (internal/podcontract):
//   - it waits until the dataplane reports its current generation ready, because the shim's DPDK
//     secondary cannot attach before the primary exists and hangs silently if it tries;
//   - it gives the shim's variables (LD_PRELOAD, FF_*) to the app's own processes only, so that
//     nothing else in the container (kubectl exec, exec probes, hooks) attaches to F-Stack, and
//     sets FF_INITIAL_LCORE_ID to a CPU of its own cpuset, which only the container knows (a
//     CPU outside it makes the shim fall back to kernel sockets without a word);
//   - it proves the app's program loads with the shim in this image (glibc's loader lists
//     what it would load) and refuses with what is missing otherwise: a library the shim needs
//     and the image lacks makes every program preloading it exit 127;
//   - when the command is Nginx, it reads the configuration Nginx will use, refuses settings that
//     make the shim misbehave and adds what the command line can fix (internal/nginxconf);
//   - before starting, it checks that the shim has enough free contexts for the app, and asks
//     for a dataplane restart otherwise (internal/shimctx): short of them, the app would run on
//     kernel sockets without a word;
//   - it runs the command as its child, forwarding signals (Nginx gets SIGQUIT, SIGTERM, then
//     SIGKILL when stopped), and ends it when the dataplane starts a new generation: a DPDK
//     secondary cannot survive its primary's restart; it then starts it again against the new
//     generation, in place (restart.go);
//   - it ends an Nginx that keeps fewer workers than it configured, which serves nothing though
//     F-Stack still answers on its listeners (workers.go), and starts it again;
//   - it turns an Nginx reload, which under the shim leaves workers without a context, into a
//     restart of Nginx in place (reload.go): the new Nginx starts beside the old one, which is
//     stopped once the new one serves (overlap.go).
package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/cpuaffinity"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// ExitDataplaneRestarted is the exit code when the app was stopped because the dataplane
// restarted and the restart budget allows no restart in place (EX_TEMPFAIL: kubelet restarts
// the container even under restartPolicy OnFailure).
const ExitDataplaneRestarted = 75

// Launcher holds what the launcher reads and how long it waits; tests point it at fake trees.
type Launcher struct {
	// ShimDir is what the dataplane wrote (read-only here): the shim, the generation and ready
	// markers, the context readings.
	ShimDir string
	// StateDir is this container's own directory of the app-state volume, the only place it
	// writes (podcontract.AppStateVolume).
	StateDir    string
	Container   string
	WaitTimeout time.Duration
	Poll        time.Duration
	Grace       time.Duration
	// QuitGrace and TermGrace bound Nginx's graceful and fast shutdown before SIGKILL; their
	// sum must stay below the pod's terminationGracePeriodSeconds (the injector sees to it).
	QuitGrace, TermGrace time.Duration
	// MovedGrace bounds the app's stop when the dataplane's generation moved: its primary is
	// already gone, nothing it does through F-Stack can finish, and the new primary cannot
	// start while the app, a secondary of the dead one, holds its runtime files. Short: on real
	// F-Stack a shim Nginx never exited on SIGTERM then (2 s, five kills of five), and the
	// contexts of what is killed die with the old generation's zones.
	MovedGrace time.Duration
	// DeadGrace bounds the stop of an Nginx none of whose workers is up (workers.go): there is
	// no request to finish, and under the multi-SC shim its master ignored SIGQUIT and SIGTERM
	// alike (3 s and 2 s, every kill), so it gets SIGTERM, then SIGKILL after DeadGrace.
	DeadGrace time.Duration
	// CPUs returns the CPUs this process may run on.
	CPUs func() ([]int, error)
	// Log receives the launcher's log (not the app's output), in the format Logging chooses.
	Log     io.Writer
	Logging logging.Options
	logOnce sync.Once
	logger  *slog.Logger
	// sigs gets every signal the launcher receives while Run runs.
	sigs chan os.Signal
	// Getenv reads the stack's process count (podcontract.EnvInstances; nil: os.Getenv).
	Getenv func(string) string
	// NginxBuild learns nginx's compiled-in paths (nil: run `nginx -V`).
	NginxBuild func(ctx context.Context, binary string) (nginxconf.Build, error)
	// MinWorkerAge and WorkerSettle judge whether the app still serves (workers.go): fewer
	// workers than configured, each up for MinWorkerAge, for longer than WorkerSettle stops it.
	// WorkerSettle 0 turns the watch off.
	MinWorkerAge, WorkerSettle time.Duration
	// Children lists a process's live children (nil: from /proc).
	Children func(pid int) []int
	// MaxRestarts bounds the app's restarts in place within RestartWindow (restart.go); 0
	// restarts nothing in place: the launcher exits as the container's app would.
	MaxRestarts   int
	RestartWindow time.Duration
	// NginxTest checks a configuration before a reload restarts Nginx with it (nil: nginx -t).
	NginxTest func(ctx context.Context, argv []string) error
	// ReloadWait bounds how long a reload's new Nginx has to bring its workers up beside the
	// old one, which serves meanwhile (overlap.go; 0: reloadWait).
	ReloadWait time.Duration
	// restarts is this container's record (podcontract.AppRestartsFile); restartTimes are the
	// restarts within the window.
	restarts     *podcontract.Restarts
	restartTimes []time.Time
}

// The defaults of the stops and the watch, measured on real F-Stack (docs/benchmarks.md "Faults").
const (
	movedGrace = 500 * time.Millisecond
	deadGrace  = 500 * time.Millisecond
	// workerSettle leaves a respawned worker of a shim mode that can respawn (not multi-SC)
	// MinWorkerAge and a second more to be counted up.
	workerSettle = 2 * time.Second
)

// New returns a Launcher with the pod contract's paths.
func New() *Launcher {
	name := os.Getenv(podcontract.EnvContainerName)
	if name == "" {
		name = "app"
	}
	return &Launcher{
		ShimDir: podcontract.ShimDir, StateDir: podcontract.AppStateDir, Container: name, WaitTimeout: 10 * time.Minute,
		Poll: 50 * time.Millisecond, Grace: podcontract.AppGrace, QuitGrace: podcontract.AppQuitGrace, TermGrace: podcontract.AppTermGrace,
		MovedGrace: movedGrace, DeadGrace: deadGrace, CPUs: cpuaffinity.Own, Log: os.Stderr, MinWorkerAge: time.Second, WorkerSettle: workerSettle,
		MaxRestarts: 10, RestartWindow: 10 * time.Minute, ReloadWait: reloadWait,
	}
}

// log is the launcher's logger: every line names the component and the container.
func (l *Launcher) log() *slog.Logger {
	l.logOnce.Do(func() {
		h, err := logging.NewHandler(l.Log, l.Logging)
		if err != nil {
			h, _ = logging.NewHandler(l.Log, logging.Options{})
		}
		l.logger = slog.New(h).With(logging.KeyComponent, logging.ComponentLauncher, logging.KeyContainer, l.Container)
	})
	return l.logger
}

// fail logs why the app does not start (err says what to do about it).
func (l *Launcher) fail(err error) { l.log().Error("not starting the app", logging.KeyErr, err) }

// Run starts argv and returns the exit code the container should end with. The app is
// restarted in place (restart.go) when the dataplane's generation moves, when it exits or is
// killed on its own, when it cannot serve, and (Nginx) when it is asked to reload; Run returns
// when the container is stopped, when the app finishes (exit 0), for what a restart cannot fix
// (a configuration refusal, exit 78; a command that cannot start, 127), and when the restart
// budget is spent.
func (l *Launcher) Run(ctx context.Context, argv []string) int {
	if len(argv) == 0 {
		l.log().Error("no command to run: usage: fstack-launcher [--log-format=text|json] [--log-level=LEVEL] -- COMMAND [ARGS...]")
		return 2
	}
	if err := l.checkStateDir(); err != nil {
		l.fail(err)
		return ExitConfig
	}
	l.loadRestarts()
	// Every signal is the launcher's from here to its exit: registered per run of the app, a
	// SIGHUP between two runs (a reload while the app restarts in place) hit Go's default
	// action and ended the container, and a SIGTERM there did not stop the wait.
	l.sigs = make(chan os.Signal, 8)
	signal.Notify(l.sigs)
	defer signal.Stop(l.sigs)
	for {
		a, env, gen, code, ok := l.prepareRun(ctx, argv)
		if !ok {
			return code
		}
		out := l.supervise(ctx, a, env, gen)
		if out.final || !l.restartInPlace(out) {
			return out.code
		}
	}
}

// prepareRun is what comes before each run of the app: the configuration first (and again at
// every restart: a reload's new file is read here; a refusal must not wait for the dataplane),
// then the dataplane, the shim and its contexts. Meanwhile no app runs to take the signals:
// SIGTERM, SIGINT and SIGQUIT end the wait and the launcher (128 + the signal, as a shell
// reports a command it stopped), and a SIGHUP needs nothing, since the app about to start reads
// its configuration then. ok is false when the launcher exits with code.
func (l *Launcher) prepareRun(ctx context.Context, argv []string) (a *app, env []string, gen string, code int, ok bool) {
	wait, stopped, done := l.signalsBetweenRuns(ctx)
	a, err := l.prepareApp(wait, argv)
	if err == nil {
		gen, env, err = l.startable(wait, a)
	}
	// Once done, no signal is read here: one that came before is seen below, one after waits for
	// supervise.
	done()
	if sig := stopped(); sig != 0 {
		l.log().Info("stopped before the app started", "signal", sig.String())
		return nil, nil, "", 128 + int(sig), false
	}
	if err != nil {
		l.fail(err)
		return nil, nil, "", failureCode(err), false
	}
	if err := l.record(gen); err != nil {
		l.fail(err)
		return nil, nil, "", 1, false
	}
	return a, env, gen, 0, true
}

// signalsBetweenRuns reads the launcher's signals until done is called: the context it returns
// ends on a signal that stops the container, which stopped then names.
func (l *Launcher) signalsBetweenRuns(parent context.Context) (ctx context.Context, stopped func() syscall.Signal, done func()) {
	ctx, cancel := context.WithCancel(parent)
	var got atomic.Int32
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-l.sigs:
				switch sig {
				case syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT:
					got.Store(int32(sig.(syscall.Signal)))
					cancel()
					return
				case syscall.SIGHUP:
					l.log().Info("SIGHUP while the app is not running: the app reads its configuration when it starts", "signal", sig.String())
				}
			}
		}
	}()
	return ctx, func() syscall.Signal { return syscall.Signal(got.Load()) }, func() { cancel(); <-ended }
}

// startable waits for the dataplane's ready generation, proves the shim loads and checks the
// shim contexts: what every start of the app needs, the first and each in place.
func (l *Launcher) startable(ctx context.Context, a *app) (string, []string, error) {
	gen, err := l.waitReady(ctx)
	var env []string
	if err == nil {
		// The shim is in place once the dataplane is ready: prove it loads before anything else.
		env, err = l.environ(ctx, a.argv[0])
	}
	if err == nil {
		gen, err = l.ensureContexts(ctx, gen, a.need)
	}
	return gen, env, err
}

// waitReady returns the generation once the dataplane reports it ready.
func (l *Launcher) waitReady(ctx context.Context) (string, error) {
	deadline := time.Now().Add(l.WaitTimeout)
	nextLog := time.Now()
	for {
		gen := l.read(podcontract.GenerationFile)
		if gen != "" && l.read(podcontract.ReadyFile) == gen {
			return gen, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the F-Stack dataplane did not report ready within %s (%s/%s is %q, %s is %q): see the %s container's log",
				l.WaitTimeout, l.ShimDir, podcontract.GenerationFile, gen, podcontract.ReadyFile, l.read(podcontract.ReadyFile), podcontract.DataplaneContainer)
		}
		if time.Now().After(nextLog) {
			l.log().Info("waiting for the F-Stack dataplane to report ready", logging.KeyGeneration, gen)
			nextLog = time.Now().Add(10 * time.Second)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(l.Poll):
		}
	}
}

// maxMarkerBytes bounds the generation and ready markers: a decimal int and a newline.
const maxMarkerBytes = 32

// read returns a marker of the shim dir, or "" when there is none or it is not a small regular
// file (read as fsutil.ReadFileBeneath does: a FIFO there does not block the launcher).
func (l *Launcher) read(name string) string {
	b, err := fsutil.ReadFileBeneath(l.ShimDir, name, maxMarkerBytes)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// checkStateDir refuses to start without this container's directory of the app-state volume:
// the launcher could write none of what the dataplane reads from it (made here, it would be in
// the container's own file system, where the dataplane never looks).
func (l *Launcher) checkStateDir() error {
	st, err := os.Stat(l.StateDir)
	if err == nil && st.IsDir() {
		return nil
	}
	if err == nil {
		err = errors.New("not a directory")
	}
	return &setupError{fmt.Sprintf("this container has no %s volume at %s (%v): the pod was injected by an older kube-fstack whose pods lack it; recreate the pod", podcontract.AppStateVolume, l.StateDir, err)}
}

// environ is the child's environment: ours with the shim's variables (shimenv.go), once the
// program is shown to load with the shim (shimload.go).
func (l *Launcher) environ(ctx context.Context, argv0 string) ([]string, error) {
	cpus, why, err := l.appCPUs()
	if err != nil {
		return nil, err
	}
	n, err := l.instances()
	if err != nil {
		return nil, err
	}
	lib := l.shimLibrary()
	if lib != "" && cpus[0] > podcontract.MaxShimLcore {
		// Only here is the app's CPU known: admission and kubectl fstack render guess it.
		return nil, &setupError{fmt.Sprintf("this container's first CPU is %d, but the shim's %s names only CPUs 0-%d: "+
			"the shim would put the app on CPU 2, outside this container's cpuset, and fall back to kernel sockets without a word; "+
			"run the pod where the kubelet gives the app container a CPU numbered %d or lower",
			cpus[0], podcontract.EnvShimInitialLcore, podcontract.MaxShimLcore, podcontract.MaxShimLcore)}
	}
	env := l.childEnv(os.Environ(), lib, n, cpus[0])
	l.log().Info(cpuaffinity.InitialLcoreEnv(cpus[0])+" ("+why+")", "cpu", cpus[0], "appCPUs", podcontract.JoinCPUs(cpus))
	if lib != "" {
		if err := l.proveShimLoads(ctx, argv0, env, lib); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// appCPUs are this container's CPUs in the order the app takes them (the master and worker 0 on
// the first): those no F-Stack lcore runs on first, as the dataplane recorded its placement
// (podcontract.AppCPUs). why says how the first was chosen, for the log. Under the lab's
// cpuPolicy Shared both containers run on the node's shared pool, where an app worker on an
// lcore's CPU takes turns with a busy-polling loop and the pair serves a fraction of either.
func (l *Launcher) appCPUs() (cpus []int, why string, err error) {
	own, err := l.CPUs()
	if err != nil {
		return nil, "", fmt.Errorf("read this container's CPUs: %w", err)
	}
	if len(own) == 0 {
		return nil, "", errors.New("this container may run on no CPU")
	}
	p, err := podcontract.ReadPlacement(l.ShimDir)
	if err != nil {
		l.log().Warn("the dataplane's placement is unreadable; the app takes this container's CPUs in order", logging.KeyErr, err)
		return own, "the first CPU of this container's cpuset", nil
	}
	if p == nil {
		return own, "the first CPU of this container's cpuset", nil
	}
	cpus, apart := podcontract.AppCPUs(own, p)
	if !apart {
		l.log().Warn(fmt.Sprintf("this container's CPUs (%s) are all F-Stack lcores' (%s): the app's processes take turns with busy-polling loops; "+
			"give the app container a CPU of its own, or the node's shared pool more CPUs than the dataplane needs", podcontract.JoinCPUs(own), podcontract.JoinCPUs(p.LcoreCPUs)))
		return cpus, "the first CPU of this container's cpuset, an lcore's", nil
	}
	return cpus, "the first CPU of this container's cpuset no F-Stack lcore runs on (lcores on " + podcontract.JoinCPUs(p.LcoreCPUs) + ")", nil
}

// failureCode is the exit code for a failure before the app started: ExitConfig for a refusal
// no restart fixes.
func failureCode(err error) int {
	var ce *configError
	var se *setupError
	if errors.As(err, &ce) || errors.As(err, &se) {
		return ExitConfig
	}
	return 1
}

// record notes the generation this container started against, for people and tools.
func (l *Launcher) record(gen string) error {
	d, err := fsutil.OpenDir(l.StateDir)
	if err != nil {
		return fmt.Errorf("record the generation: %w", err)
	}
	defer d.Close()
	return d.WriteAtomic(podcontract.AppStartedFile, []byte(gen+"\n"), 0o644)
}
