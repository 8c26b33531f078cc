package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeagent"
	"github.com/kube-fstack/kube-fstack/cni/internal/seccompprofile"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// runAgent is `fstack-cni-installer node-agent`: the DaemonSet's second container, the same
// image, so nodes need no other one.
func runAgent(args []string) error {
	a, f, err := parseAgentFlags(args)
	if err != nil {
		return err
	}
	log, err := logging.New(os.Stderr, logging.ComponentNodeAgent, f.logOpts)
	if err != nil {
		return err
	}
	a.Log = log.With(logging.KeyNode, a.Node)
	if a.Period <= 0 {
		return fmt.Errorf("--period %s: must be positive", a.Period)
	}
	if err := f.wire(a); err != nil {
		return fmt.Errorf("node-agent: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return a.Run(ctx)
}

// agentFlags are what of the node agent's command line is not the Agent's own.
type agentFlags struct {
	logOpts                logging.Options
	socketRoot, ovsAnswers string
}

func parseAgentFlags(args []string) (*nodeagent.Agent, *agentFlags, error) {
	fs := flag.NewFlagSet("node-agent", flag.ContinueOnError)
	a, f := &nodeagent.Agent{}, &agentFlags{logOpts: logging.FromEnv(os.LookupEnv)}
	f.logOpts.BindFlags(fs)
	fs.StringVar(&a.Node, "node", os.Getenv("NODE_NAME"), "this node's name (the downward API's spec.nodeName)")
	fs.DurationVar(&a.Period, "period", time.Minute, "how often to check the node")
	fs.StringVar(&a.Checks.Root, "root", "/", "where the node's /sys and /proc are")
	fs.StringVar(&a.Checks.KubeletDir, "kubelet-dir", "/host/kubelet", "the host's kubelet root dir, mounted read-only")
	fs.StringVar(&f.socketRoot, "socket-root", "/host/vhost-parent/vhost", "the vhost-user socket root inside a mount of its host parent dir")
	fs.StringVar(&a.Checks.Bridge, "bridge", "br-fstack", "the OVS bridge fstack-cni adds ports to")
	fs.StringVar(&a.Checks.SeccompDir, "seccomp-dir", "/host/seccomp", "the kubelet's seccomp directory of the project (<kubelet root>/seccomp/"+podcontract.SeccompProfileDir+"), where the agent installs the dataplane's profile")
	fs.DurationVar(&a.CheckpointMinUptime, "checkpoint-min-uptime", 11*time.Minute, "how long to run before exiting for a replaced CPU manager checkpoint (over twice the kubelet's 5m maximum restart back-off, so restarts do not crash-loop)")
	fs.StringVar(&a.Checks.KubeletReservedCPUs, "kubelet-reserved-cpus", "", "the kubelet's reservedSystemCPUs, when set on it (a CPU list like 0-1): the CPUs OVS's PMD threads may run on; empty: the kubelet's own pick of ceil(capacity - allocatable) CPUs")
	fs.StringVar(&f.ovsAnswers, "ovs-answers", "/run/kube-fstack-node/ovs.json", "the file the installer container writes its OVS answers to (empty: fail the OVS checks)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if err := nodecheck.CheckCPUList(a.Checks.KubeletReservedCPUs); err != nil {
		return nil, nil, fmt.Errorf("--kubelet-reserved-cpus (chart value cni.nodeAgent.kubeletReservedCPUs): %w; give the kubelet's reservedSystemCPUs, e.g. 0-1", err)
	}
	if a.Node == "" {
		return nil, nil, errors.New("--node (or NODE_NAME) is required: set it from the downward API's spec.nodeName")
	}
	return a, f, nil
}

// wire gives the agent what its checks read and the client it publishes with.
func (f *agentFlags) wire(a *nodeagent.Agent) error {
	profile, err := seccompprofile.Dataplane()
	if err != nil {
		return err
	}
	a.Checks.SeccompProfile = profile
	a.Checks.SocketRootParent, a.Checks.SocketRootName = filepath.Dir(f.socketRoot), filepath.Base(f.socketRoot)
	a.Checkpoint = filepath.Join(a.Checks.KubeletDir, "cpu_manager_state")
	// The pod's network namespace is the node's (hostNetwork): the bridge's kernel ports are here
	// when OVS runs on the host.
	a.Checks.Links = nodecheck.KernelLinks{}
	// The agent holds no OVS socket (see internal/nodecheck/ovsfile.go). The installer asks on
	// the same period; three periods without an answer mean it is stuck or gone.
	if ovsAnswers := f.ovsAnswers; ovsAnswers != "" {
		a.Checks.OVS = &nodecheck.OVSFile{Path: ovsAnswers, MaxAge: 3*a.Period + 10*time.Second}
		a.FirstRoundAfter = func() bool { _, err := os.Lstat(ovsAnswers); return err == nil }
		a.FirstRoundWait = 30 * time.Second
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = "kube-fstack-node-agent"
	a.Client, err = kubernetes.NewForConfig(cfg)
	return err
}

// runCleanup is `fstack-cni-installer node-cleanup`: the chart's post-delete hook, which removes
// the agents' labels and report from every Node after `helm uninstall`.
func runCleanup(args []string) error {
	fs := flag.NewFlagSet("node-cleanup", flag.ContinueOnError)
	c := &nodeagent.Cleanup{Poll: 2 * time.Second}
	logOpts := logging.FromEnv(os.LookupEnv)
	logOpts.BindFlags(fs)
	fs.StringVar(&c.Namespace, "namespace", "", "the namespace of the CNI DaemonSet's pods")
	fs.StringVar(&c.Selector, "selector", "", "the label selector of the CNI DaemonSet's pods")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.Namespace == "" || c.Selector == "" {
		return errors.New("--namespace and --selector are required: the CNI DaemonSet's pods, whose agents must be gone before their labels are")
	}
	log, err := logging.New(os.Stderr, logging.ComponentNodeCleanup, logOpts)
	if err != nil {
		return err
	}
	c.Log = log
	client, err := inClusterClient("kube-fstack-node-cleanup")
	if err != nil {
		return fmt.Errorf("node-cleanup: %w", err)
	}
	c.Client = client
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return c.Run(ctx)
}

func inClusterClient(userAgent string) (kubernetes.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = userAgent
	return kubernetes.NewForConfig(cfg)
}
