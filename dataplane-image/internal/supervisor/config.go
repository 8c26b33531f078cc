// Package supervisor is the dataplane container's entrypoint logic: it gathers the facts only
// the pod knows, renders config.ini with the shared renderer, starts F-Stack's processes in the
// order DPDK multi-process needs (primary, readiness, secondaries), places the shim for the app
// containers, reports readiness and metrics, and starts a new generation in place when a process
// dies (restart.go).
//
// It is the supervision core: the run loop, the processes (F-Stack, a native program or
// F-Stack's Nginx), the shim placement, the app probes through the probe agent and the HTTP
// endpoints. What it builds on lives beside it: facts (what only the pod knows: the spec
// snapshot, CPUs, attachments, PCI, hugepages, the placed launcher), readiness (when a DPDK
// process counts as started), contexts (the shim's free contexts) and metrics (its collectors).
package supervisor

import (
	"context"
	"time"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/facts"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nginxconf"
)

// Launch says what program runs as each F-Stack process.
type Launch struct {
	// FStack is F-Stack's binary (adapter/syscall's fstack), run with F-Stack's own CLI.
	FStack string
	// ProgramMode runs Program (and SecondaryProgram) with the renderer's EAL argv instead, so a
	// plain DPDK program stands in for F-Stack with exactly the arguments F-Stack would build.
	ProgramMode      bool
	Program          string
	SecondaryProgram string // empty: Program
	// PrimaryArgs and SecondaryArgs are the program's own arguments, after "--". {proc} and
	// {procs} expand to the process index and count.
	PrimaryArgs, SecondaryArgs []string
	// LcoresPerProc > 1 replaces F-Stack's -c<one CPU> with that many lcores all pinned on that
	// same CPU (--lcores=0@c,1@c): testpmd wants a forwarding lcore besides its main one.
	LcoresPerProc int
	// PCIStandin, in program mode, replaces PCI devices DPDK cannot probe here (facts/standin_pci.go).
	PCIStandin *facts.PCIStandin
	// Native runs a program linked with libfstack (the StackInstance's spec.program) instead of
	// F-Stack's fstack: PerProcess starts NativeArgv once per F-Stack process with F-Stack's own
	// arguments appended, as F-Stack's start.sh; Nginx starts NativeArgv, F-Stack's Nginx, once,
	// and its master forks the processes (nginx.go).
	Native     fsv1.ProgramMode
	NativeArgv []string
	// NginxBuild asks F-Stack's Nginx for its compiled-in paths (nginx -V) when its command
	// line does not name the configuration file absolutely; nil runs it.
	NginxBuild func(ctx context.Context, binary string) (nginxconf.Build, error)
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
	// supervisor, performed by ProbeAgent through F-Stack (appprobe.go).
	AppProbes  string
	ProbeAgent string
	// NodeIPs is podcontract.EnvNodeIPs: with the pod's default gateways, the only callers
	// /app-probe answers and the ones the connection cap always lets in (node.go, http.go).
	NodeIPs string
	// ShimContexts says where the shim's free contexts are counted: contexts.ContextsZone
	// (F-Stack's memzones), contexts.ContextsStandin (the stand-in's slot files) or
	// contexts.ContextsOff.
	ShimContexts string
	// ContextsInterval is how often they are read and published for the launchers.
	ContextsInterval time.Duration
	// StandinContextsDelay is how long after a generation's first process is up the stand-in's
	// slot files appear (contexts.ContextsStandin). F-Stack creates its zones inside ff_init,
	// after the port is up; with patch 0004 they are there when the supervisor sees the process
	// up (measured on v1.25 in the local cluster: the probe agent attached 1.4 ms later), so the
	// stand-in's gap is short, but not zero, so that readers still meet files not there yet.
	StandinContextsDelay time.Duration
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
