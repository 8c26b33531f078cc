// Package supervisor is the dataplane container's entrypoint logic: it gathers the facts only
// the pod knows, renders config.ini with the shared renderer, starts F-Stack's processes in the
// order DPDK multi-process needs (primary, readiness, secondaries), places the shim for the app
// containers, reports readiness and metrics, and starts a new generation in place when a process
// dies (restart.go).
//
// It is the supervision core: Run, a generation's start as a list of steps (steps.go: each
// generation runs under a context whose cancel cause says why it ended), the processes it
// starts (F-Stack, a native program or F-Stack's Nginx master), the shim placement and the HTTP
// endpoints. What it builds on lives beside it: facts (what only the pod knows: the spec
// snapshot, CPUs, attachments, PCI, hugepages, the placed launcher), readiness (when a DPDK
// process counts as started), contexts (the shim's free contexts), appprobe (the app's probes
// through the probe agent), native (a program linked with libfstack, F-Stack's Nginx) and
// metrics (its collectors). None of them imports the core.
package supervisor

import (
	"context"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/contexts"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// Launch says what program runs as each F-Stack process.
type Launch struct {
	// FStack is F-Stack's binary (adapter/syscall's fstack), run with F-Stack's own CLI.
	FStack string
	// Programs, when set, say what runs as each F-Stack process instead of F-Stack's fstack: a
	// build of the supervisor other than the product's sets it (the stand-in image's runs DPDK's
	// testpmd with the EAL argv F-Stack would build, dataplane-image/standin/program). The
	// product's main leaves it nil: its binary starts F-Stack's fstack or the spec's native program.
	Programs Programs
	// Native runs a program linked with libfstack (the StackInstance's spec.program) instead of
	// F-Stack's fstack: PerProcess starts NativeArgv once per F-Stack process with F-Stack's own
	// arguments appended, as F-Stack's start.sh; Nginx starts NativeArgv, F-Stack's Nginx, once,
	// and its master forks the processes (nginx.go, native/).
	Native     fsv1.ProgramMode
	NativeArgv []string
	// NginxBuild asks F-Stack's Nginx for its compiled-in paths (nginx -V) when its command
	// line does not name the configuration file absolutely; nil runs it.
	NginxBuild func(ctx context.Context, binary string) (nginxconf.Build, error)
}

// Programs start something other than F-Stack as its processes (Launch.Programs).
type Programs interface {
	// Plan is called once per generation, before its first process starts; what it says goes
	// to the supervisor's log as a warning.
	Plan(res *render.Result, warn func(msg string))
	// Argv is process k's command line (0 <= k < len(res.EAL)).
	Argv(res *render.Result, k int) ([]string, error)
}

// Timing bounds every wait.
type Timing struct {
	// StartTimeout bounds the primary's readiness (and each secondary's).
	StartTimeout time.Duration
	// Grace is how long children get between SIGTERM and SIGKILL.
	Grace time.Duration
	// Poll is the readiness polling interval.
	Poll time.Duration
	// SecondariesTimeout bounds the wait, before a new primary starts, for the previous
	// generation's DPDK secondaries (the apps) to let go of its runtime files.
	SecondariesTimeout time.Duration
}

// Config is everything the supervisor is told.
type Config struct {
	Paths  facts.Paths
	Launch Launch
	Timing Timing
	// ReadyCommand, when set, must exit 0 for process {proc} to count as ready (real F-Stack:
	// ff_traffic -p {proc} -s). Without it the primary is ready when its EAL finished init and
	// a secondary when it has joined the primary's IPC channel.
	ReadyCommand []string
	// ReadyTelemetry are telemetry commands the primary must answer before secondaries start,
	// each "command" (any non-empty reply) or "command~text" (the reply contains text). EAL
	// init is not enough for an application that creates its shared objects after it: a
	// secondary started then dies looking them up (testpmd: /mempool/list~mb_pool_0).
	ReadyTelemetry []string
	// RequireShim fails the start when the image has no libff_syscall.so for the spec's shim
	// mode (--require-shim=false only warns).
	RequireShim bool
	// AppProbes is podcontract.EnvAppProbes: the app probes the injector rewrote to this
	// supervisor, performed by ProbeAgent through F-Stack (appprobe/).
	AppProbes  string
	ProbeAgent string
	// NodeIPs is podcontract.EnvNodeIPs: with the pod's default gateways, the only callers
	// /app-probe answers and the ones the connection cap always lets in (node.go, http.go).
	NodeIPs string
	// StatusToken is podcontract.EnvStatusToken: besides the node, only a request carrying it
	// (podcontract.StatusTokenHeader) is answered /status and /config (http.go). Empty, or not
	// a token podcontract accepts, answers them to the node only.
	StatusToken string
	// ShimContexts says where the shim's free contexts are counted: contexts.ContextsZone
	// (F-Stack's memzones), contexts.ContextsOff, or a kind of ContextKinds.
	ShimContexts string
	// ContextKinds are the further kinds of ShimContexts a build of the supervisor adds (the
	// stand-in image's: its shim's slot files), each making a generation's source from the DPDK
	// runtime directory and file prefix. The product's main adds none.
	ContextKinds map[string]func(runtimeDir, prefix string) contexts.ContextSource
	// ContextsInterval is how often they are read and published for the launchers.
	ContextsInterval time.Duration
	// LinkInterval is how often, once a generation is ready, the primary is asked the link
	// status of each vhost-user port (linkwatch.go); 0 turns the watch off.
	LinkInterval time.Duration
	// LinkDownLimit ends a generation (ErrPortDown) whose port has stayed down this long; 0
	// never does.
	LinkDownLimit time.Duration
	// Logging chooses the log's format and level (--log-format, --log-level).
	Logging logging.Options
	// Restarts bounds the generations started in place (restart.go).
	Restarts RestartBudget
}

// RestartBudget bounds in-place restarts: the Max+1-th within Window is a crash loop, and the
// supervisor exits so that the kubelet's back-off spaces the next tries and the container's
// restart count shows the loop. Max 0 restarts nothing in place.
type RestartBudget struct {
	Max    int
	Window time.Duration
}
