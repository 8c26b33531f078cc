// Package cli is fstack-supervisor's command line: its flags, their checks, the run and the
// wait-placed hook. The product's main (dataplane-image/cmd/fstack-supervisor) calls Main with
// no Extension; the stand-in image's main (dataplane-image/standin/cmd/fstack-supervisor) adds
// its program mode through one, so the real image's binary carries neither its flags nor its
// code.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/fftraffic"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// ListFlag collects a repeatable flag (an Extension's too).
type ListFlag []string

func (l *ListFlag) String() string     { return strings.Join(*l, " ") }
func (l *ListFlag) Set(v string) error { *l = append(*l, v); return nil }

// Extension is what a build of the supervisor other than the product's adds to its command
// line: its own flags, and what they change in the parsed configuration (Launch.Programs,
// ContextKinds), before the configuration is checked.
type Extension interface {
	Flags(fs *flag.FlagSet)
	Configure(cfg *supervisor.Config) error
}

type options struct {
	cfg         supervisor.Config
	podInfoSpec string
	listen      string
	ffTraffic   string
	readyCmd    string
	native      string
}

// bindFlags defines the supervisor's flags on fs, into o.
func (o *options) bindFlags(fs *flag.FlagSet) {
	p, l, t := &o.cfg.Paths, &o.cfg.Launch, &o.cfg.Timing
	fs.StringVar(&p.PodInfoDir, "podinfo-dir", p.PodInfoDir, "downward-API volume; the spec is its file \"spec\"")
	fs.StringVar(&o.podInfoSpec, "spec-file", "", "read the StackInstance spec (JSON) from this file instead of <podinfo-dir>/spec")
	fs.StringVar(&p.PodSocketDir, "pod-socket-dir", p.PodSocketDir, "the CNI plugin's per-pod directory (<ifname>.json device info, sockets)")
	fs.StringVar(&p.HugePagesDir, "hugepages-dir", p.HugePagesDir, "hugetlbfs mount shared with the app containers")
	fs.StringVar(&p.RuntimeDir, "dpdk-runtime-dir", p.RuntimeDir, "DPDK runtime directory (another path sets RUNTIME_DIRECTORY for the children; it must end in /dpdk)")
	fs.StringVar(&p.ShimDir, "shim-dir", p.ShimDir, "volume the supervisor fills for the app containers, read-only to them (shim, launcher, generation and ready markers)")
	fs.StringVar(&p.AppStateDir, "app-state-dir", p.AppStateDir, "volume the app containers' launchers write, one directory per container (app-broken markers, restart requests)")
	fs.StringVar(&p.ImageShimDir, "image-shim-dir", p.ImageShimDir, "what the image carries for the shim dir: top-level files and <mode>/libff_syscall.so")
	fs.StringVar(&p.ConfigFile, "config-file", p.ConfigFile, "where config.ini is written")
	fs.StringVar(&p.CpusetFile, "cpuset-file", p.CpusetFile, "the container's cpuset, to cross-check the CPU affinity (default: found in the process's own cgroup, v1 or v2; \"none\": no check)")
	fs.StringVar(&l.FStack, "fstack", "", "F-Stack's binary, run as <fstack> --conf <config> --proc-type=... --proc-id=k (default: <image-shim-dir>/<shim mode>/fstack)")
	fs.StringVar(&o.native, "native", "", "run a program linked with libfstack, given after --, as the F-Stack processes: PerProcess (once per process with F-Stack's --conf, --proc-type and --proc-id appended, as F-Stack's start.sh) or Nginx (F-Stack's Nginx master, which forks one worker per process); the injection passes it for a StackInstance's spec.program")
	fs.DurationVar(&t.StartTimeout, "start-timeout", 60*time.Second, "bound on each process becoming ready")
	fs.DurationVar(&t.Grace, "grace", podcontract.DataplaneStopGrace, "time between SIGTERM and SIGKILL when stopping (the injected pod's terminationGracePeriodSeconds covers the default)")
	fs.DurationVar(&t.Poll, "poll", 20*time.Millisecond, "readiness polling interval")
	fs.DurationVar(&t.SecondariesTimeout, "secondaries-timeout", 30*time.Second, "bound on waiting, before a new primary starts, for the previous generation's DPDK secondaries (the apps, which their launchers stop when the generation moves) to let go of its runtime files")
	fs.StringVar(&o.readyCmd, "ready-command", "", "command (space-separated, {proc} expands) that must succeed for a process to be ready, e.g. \"/usr/local/bin/ff_traffic -p {proc} -s\"")
	fs.Var((*ListFlag)(&o.cfg.ReadyTelemetry), "ready-telemetry", "telemetry check the primary must pass before secondaries start: \"command\" (non-empty reply) or \"command~text\" (repeat), e.g. /mempool/list~mb_pool_0 for testpmd")
	fs.BoolVar(&o.cfg.RequireShim, "require-shim", true, "fail when the image has no libff_syscall.so for the spec's shim mode")
	fs.StringVar(&o.cfg.ShimContexts, "shim-contexts", contexts.ContextsZone, "where the shim's free contexts are counted: zone (F-Stack's ff_socket_ops_zone_<k> memzones, through telemetry and the primary's memory) or off")
	fs.DurationVar(&o.cfg.ContextsInterval, "contexts-interval", 100*time.Millisecond, "how often the shim contexts are read and published to <shim-dir>/contexts")
	fs.DurationVar(&o.cfg.LinkInterval, "link-interval", time.Second, "once the dataplane is ready, how often the primary is asked (DPDK telemetry /ethdev/link_status) the link of each vhost-user port: the asking is what makes DPDK accept OVS's new connection after an OVS restart (F-Stack never asks after its start), and a port down withdraws readiness; 0 turns it off")
	fs.DurationVar(&o.cfg.LinkDownLimit, "link-down-limit", 30*time.Second, "restart the dataplane in place when a vhost-user port's link stays down this long (0: never). The asking reconnects the port within an interval of OVS being back; a restart helps only when that reconnect failed, not while OVS itself is down, since a new primary waits for OVS to connect before it is ready")
	fs.StringVar(&o.ffTraffic, "ff-traffic", "/usr/local/bin/ff_traffic", "ff_traffic for per-process metrics (skipped when absent)")
	fs.StringVar(&o.cfg.ProbeAgent, "probe-agent", podcontract.ProbeAgent, "the probe agent that performs the app probes of "+podcontract.EnvAppProbes+" through F-Stack")
	fs.IntVar(&o.cfg.Restarts.Max, "max-restarts", 10, "in-place restarts of the dataplane (a new generation after a process died, for shim contexts, ...) allowed within --restart-window; one more is a crash loop and the supervisor exits, so that the kubelet restarts the container with its back-off; 0: exit on the first")
	fs.DurationVar(&o.cfg.Restarts.Window, "restart-window", 10*time.Minute, "the window of --max-restarts")
	fs.StringVar(&o.listen, "listen", ":"+strconv.Itoa(podcontract.SupervisorPort), "address of /readyz, /healthz and /metrics")
}

func parseFlags(args []string, ext Extension) (*options, error) {
	o := &options{cfg: supervisor.Config{Paths: facts.DefaultPaths()}}
	p, l := &o.cfg.Paths, &o.cfg.Launch
	fs := flag.NewFlagSet("fstack-supervisor", flag.ContinueOnError)
	o.bindFlags(fs)
	o.cfg.Logging.BindFlags(fs)
	if ext != nil {
		ext.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.native != "" {
		l.Native, l.NativeArgv = fsv1.ProgramMode(o.native), fs.Args()
	} else if fs.NArg() > 0 {
		// A hook naming a subcommand this binary lacks must fail, not start a second dataplane.
		return nil, fmt.Errorf("unknown argument %q (the only subcommand is wait-placed; a native program comes after --native=<mode> --)", fs.Arg(0))
	}
	p.SpecFile = filepath.Join(p.PodInfoDir, podcontract.PodInfoSpec)
	if o.podInfoSpec != "" {
		p.SpecFile = o.podInfoSpec
	}
	if o.native == "" {
		// A program linked with libfstack has no adapter for the probe agent to reach it through.
		o.cfg.AppProbes = os.Getenv(podcontract.EnvAppProbes)
	}
	o.cfg.NodeIPs = os.Getenv(podcontract.EnvNodeIPs)
	// The token is the supervisor's alone: the F-Stack processes and the probe agent it starts
	// (os.Environ, read after this) do not get it.
	o.cfg.StatusToken = os.Getenv(podcontract.EnvStatusToken)
	_ = os.Unsetenv(podcontract.EnvStatusToken)
	if o.readyCmd != "" {
		o.cfg.ReadyCommand = strings.Fields(o.readyCmd)
	}
	if ext != nil {
		if err := ext.Configure(&o.cfg); err != nil {
			return nil, err
		}
	}
	return o, o.validate()
}

func (o *options) validate() error {
	l, rd := &o.cfg.Launch, o.cfg.Paths.RuntimeDir
	if err := o.cfg.Logging.Check(); err != nil {
		return err
	}
	if r := o.cfg.Restarts; r.Max < 0 || r.Window <= 0 {
		return fmt.Errorf("--max-restarts=%d --restart-window=%s: want a count of 0 or more and a positive window", r.Max, r.Window)
	}
	if err := validateNative(l); err != nil {
		return err
	}
	if err := o.cfg.CheckShimContexts(); err != nil {
		return err
	}
	if rd != podcontract.DPDKRuntimeDir && filepath.Base(rd) != "dpdk" {
		return fmt.Errorf("--dpdk-runtime-dir %s must end in /dpdk: DPDK only relocates it as $RUNTIME_DIRECTORY/dpdk", rd)
	}
	return nil
}

func validateNative(l *supervisor.Launch) error {
	switch {
	case l.Native == "":
		return nil
	case l.Native != fsv1.ProgramPerProcess && l.Native != fsv1.ProgramNginx:
		return fmt.Errorf("--native=%s: want %s or %s", l.Native, fsv1.ProgramPerProcess, fsv1.ProgramNginx)
	case len(l.NativeArgv) == 0:
		return fmt.Errorf("--native=%s needs the program after --, e.g. --native=%s -- /usr/local/bin/helloworld", l.Native, l.Native)
	case l.Programs != nil:
		return fmt.Errorf("--native=%s: this build was also told to start its own program as the F-Stack processes; give one of the two", l.Native)
	}
	return nil
}

// Main runs fstack-supervisor with args (without argv[0]) and returns its exit code: it renders
// F-Stack's config.ini from the StackInstance spec the pod was admitted with and the pod's own
// facts, starts the F-Stack processes in order, places the shim for the app containers and
// serves /readyz, /healthz and /metrics and /status. When an F-Stack process dies it starts a
// new generation in place (the apps' launchers restart them against it); it exits non-zero
// only for what a new generation cannot fix and for a crash loop (supervisor.RunInPlace).
// `fstack-supervisor wait-placed` is the dataplane's postStart hook. ext is nil in the product.
func Main(args []string, ext Extension) int {
	if len(args) > 0 && args[0] == "wait-placed" {
		return waitPlaced(args[1:])
	}
	o, err := parseFlags(args, ext)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "fstack-supervisor:", err)
		return 2
	}
	// The log goes to stderr, as every kube-fstack binary's (docs/logging.md).
	s := supervisor.New(o.cfg, facts.OSFactSource(o.cfg.Paths), os.Stderr)
	if _, err := os.Stat(o.ffTraffic); err == nil {
		s.Traffic = &fftraffic.Reader{Binary: o.ffTraffic, Timeout: 3 * time.Second}
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		s.Logger().Error("cannot listen", "addr", o.listen, logging.KeyErr, err)
		return 1
	}
	if !podcontract.ValidStatusToken(o.cfg.StatusToken) {
		s.Logger().Warn("no valid status token (" + podcontract.EnvStatusToken + "; a pod injected before kube-fstack gave one): " +
			podcontract.StatusPath + " and " + podcontract.ConfigPath + " answer the node only; re-create the pod to read them through kubectl fstack and the operator")
	}
	go func() { _ = s.Serve(ln) }()
	// The first SIGTERM stops the dataplane; later ones are caught too, and change nothing.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := s.RunInPlace(ctx); err != nil {
		s.Logger().Error("stopped", logging.KeyErr, err)
		return 1
	}
	return 0
}

// waitPlaced is the dataplane's postStart hook: it returns 0 once the launcher is in the shim
// volume, so the kubelet starts the app containers only then (see facts.WaitPlaced).
func waitPlaced(args []string) int {
	fs := flag.NewFlagSet("fstack-supervisor wait-placed", flag.ContinueOnError)
	shimDir := fs.String("shim-dir", podcontract.ShimDir, "volume shared with the app containers")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up (the kubelet then restarts the container) after this long")
	poll := fs.Duration("poll", 5*time.Millisecond, "how often to look")
	addr := fs.String("supervisor", "127.0.0.1:"+strconv.Itoa(podcontract.SupervisorPort), "where the supervisor answers /startedz, asked only to explain a failure")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := facts.WaitPlaced(ctx, *shimDir, *poll, facts.StartedzReason(*addr)); err != nil {
		fmt.Fprintln(os.Stderr, "fstack-supervisor wait-placed:", err)
		return 1
	}
	return 0
}
