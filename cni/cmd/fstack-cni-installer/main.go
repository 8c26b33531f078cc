// Command fstack-cni-installer is the entrypoint of the node DaemonSet: it copies fstack-cni
// into the host's CNI bin dir atomically, optionally merges it into a chained conflist, keeps
// both in place, answers the node agent's OVS questions (ovs.go), puts fstack-cni's
// anti-spoofing flows back when ovs-vswitchd restarts (internal/flowkeeper), and exits 0 on
// SIGTERM. With --check it only says whether the node is installed (the DaemonSet's probes).
// `fstack-cni-installer node-agent` checks the node instead and publishes the result on its Node
// (agent.go); `node-cleanup` removes what the agents published (the chart's uninstall hook).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kube-fstack/kube-fstack/cni/internal/flowkeeper"
	"github.com/kube-fstack/kube-fstack/cni/internal/installer"
	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "fstack-cni-installer: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "node-agent" {
		return runAgent(os.Args[2:])
	}
	if len(os.Args) > 1 && os.Args[1] == "node-cleanup" {
		return runCleanup(os.Args[2:])
	}
	f := parseFlags()
	log, err := logging.New(os.Stderr, logging.ComponentInstaller, f.logOpts)
	if err != nil {
		return err
	}
	in := f.in
	if in.NodeConfig != "" {
		if in.NodeConf, err = nodeconf.Parse([]byte(f.nodeConf)); err != nil {
			return fmt.Errorf("--node-config-data: %w", err)
		}
	}
	in.Log, f.asker.Log = log, log

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if f.once {
		return in.Once()
	}
	if f.check {
		return in.Check()
	}
	if err := f.keepFlows(ctx, log); err != nil {
		return err
	}
	if err := f.answerOVS(ctx); err != nil {
		return err
	}
	return in.Run(ctx)
}

// flags are the installer's command line.
type flags struct {
	in          *installer.Installer
	logOpts     logging.Options
	once        bool
	check       bool
	nodeConf    string
	ovsdbSocket string
	asker       *ovsAsker
	keeper      *flowkeeper.Keeper
	keep        bool
}

func parseFlags() *flags {
	f := &flags{in: &installer.Installer{}, asker: &ovsAsker{}, keeper: &flowkeeper.Keeper{Retry: time.Second}}
	f.logOpts = logging.FromEnv(os.LookupEnv)
	f.logOpts.BindFlags(flag.CommandLine)
	var plugin string
	flag.StringVar(&f.in.Source, "source", "/usr/local/bin/fstack-cni", "the fstack-cni binary to install")
	flag.StringVar(&f.in.BinDir, "bin-dir", "/host/opt/cni/bin", "the host's CNI bin dir")
	flag.StringVar(&f.in.Conflist, "conflist", "", "a chained conflist to merge the plugin into (empty: leave CNI config alone, e.g. with Multus)")
	flag.StringVar(&plugin, "plugin-config", `{"type":"fstack-cni"}`, "the plugin's JSON object for the conflist")
	flag.DurationVar(&f.in.Interval, "interval", 10*time.Second, "how often to re-check and re-install")
	flag.BoolVar(&f.once, "once", false, "install once and exit")
	flag.BoolVar(&f.check, "check", false, "write nothing; exit 1 unless the node is as the other flags would install it: the binary the image's, the node config and the conflist entry written (the DaemonSet's probes)")
	flag.StringVar(&f.in.NodeConfig, "node-config", "", "where fstack-cni's node config goes (the host's /etc/kube-fstack/cni.json, mounted; empty: leave it to the node's administrator)")
	flag.StringVar(&f.nodeConf, "node-config-data", "{}", "fstack-cni's node config as JSON: the node's paths and the namespaces served (cni/README.md)")
	flag.StringVar(&f.ovsdbSocket, "ovsdb-socket", "", "OVSDB's unix socket, to answer the node agent's OVS questions and keep the flows (empty: do neither)")
	flag.StringVar(&f.asker.Bridge, "bridge", "br-fstack", "the OVS bridge fstack-cni adds ports to")
	flag.StringVar(&f.asker.Path, "ovs-answers", "/run/kube-fstack-node/ovs.json", "the file (in a volume shared with the node agent) the answers go to (empty: answer none)")
	flag.DurationVar(&f.asker.Period, "ovs-period", time.Minute, "how often to ask OVS (the node agent's period)")
	flag.BoolVar(&f.keep, "keep-flows", false, "keep fstack-cni's anti-spoofing flows on its ports: put them back when ovs-vswitchd restarts (needs --ovsdb-socket)")
	flag.DurationVar(&f.keeper.Period, "keep-flows-period", 30*time.Second, "how often to check every port's flows besides when ovs-vswitchd restarts")
	flag.Parse()
	f.in.Plugin = []byte(plugin)
	return f
}

// keepFlows starts the flow keeper when --keep-flows asks for it.
func (f *flags) keepFlows(ctx context.Context, log *slog.Logger) error {
	if !f.keep {
		return nil
	}
	if f.ovsdbSocket == "" {
		return errors.New("--keep-flows needs --ovsdb-socket: the flows are rebuilt from the ports OVSDB holds")
	}
	if f.keeper.Period <= 0 {
		return fmt.Errorf("--keep-flows-period %s: must be positive", f.keeper.Period)
	}
	f.keeper.OVSDB, f.keeper.Log = f.ovsdbSocket, log
	go f.keeper.Run(ctx)
	return nil
}

// answerOVS starts answering the node agent's OVS questions, when there is a socket to ask and
// a file to answer in.
func (f *flags) answerOVS(ctx context.Context) error {
	if f.ovsdbSocket == "" || f.asker.Path == "" {
		return nil
	}
	if f.asker.Period <= 0 {
		return fmt.Errorf("--ovs-period %s: must be positive", f.asker.Period)
	}
	f.asker.OVS = &nodecheck.OVSDB{Socket: f.ovsdbSocket}
	go f.asker.run(ctx)
	return nil
}
