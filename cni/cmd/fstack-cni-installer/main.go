// Command fstack-cni-installer is the entrypoint of the node DaemonSet: it copies fstack-cni
// into the host's CNI bin dir atomically, optionally merges it into a chained conflist, keeps
// both in place, answers the node agent's OVS questions (ovs.go), puts fstack-cni's
// anti-spoofing flows back when ovs-vswitchd restarts (internal/flowkeeper), and exits 0 on
// SIGTERM.
// `fstack-cni-installer node-agent` checks the node instead and publishes the result on its Node
// (agent.go); `node-cleanup` removes what the agents published (the chart's uninstall hook).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	in := &installer.Installer{}
	logOpts := logging.FromEnv(os.LookupEnv)
	logOpts.BindFlags(flag.CommandLine)
	var plugin string
	var once bool
	flag.StringVar(&in.Source, "source", "/usr/local/bin/fstack-cni", "the fstack-cni binary to install")
	flag.StringVar(&in.BinDir, "bin-dir", "/host/opt/cni/bin", "the host's CNI bin dir")
	flag.StringVar(&in.Conflist, "conflist", "", "a chained conflist to merge the plugin into (empty: leave CNI config alone, e.g. with Multus)")
	flag.StringVar(&plugin, "plugin-config", `{"type":"fstack-cni"}`, "the plugin's JSON object for the conflist")
	flag.DurationVar(&in.Interval, "interval", 10*time.Second, "how often to re-check and re-install")
	flag.BoolVar(&once, "once", false, "install once and exit")
	var nodeConf string
	flag.StringVar(&in.NodeConfig, "node-config", "", "where fstack-cni's node config goes (the host's /etc/kube-fstack/cni.json, mounted; empty: leave it to the node's administrator)")
	flag.StringVar(&nodeConf, "node-config-data", "{}", "fstack-cni's node config as JSON: the node's paths and the namespaces served (cni/README.md)")
	asker := &ovsAsker{}
	var ovsdbSocket string
	flag.StringVar(&ovsdbSocket, "ovsdb-socket", "", "OVSDB's unix socket, to answer the node agent's OVS questions and keep the flows (empty: do neither)")
	flag.StringVar(&asker.Bridge, "bridge", "br-fstack", "the OVS bridge fstack-cni adds ports to")
	flag.StringVar(&asker.Path, "ovs-answers", "/run/kube-fstack-node/ovs.json", "the file (in a volume shared with the node agent) the answers go to (empty: answer none)")
	flag.DurationVar(&asker.Period, "ovs-period", time.Minute, "how often to ask OVS (the node agent's period)")
	keeper := &flowkeeper.Keeper{Retry: time.Second}
	var keepFlows bool
	flag.BoolVar(&keepFlows, "keep-flows", false, "keep fstack-cni's anti-spoofing flows on its ports: put them back when ovs-vswitchd restarts (needs --ovsdb-socket)")
	flag.DurationVar(&keeper.Period, "keep-flows-period", 30*time.Second, "how often to check every port's flows besides when ovs-vswitchd restarts")
	flag.Parse()
	in.Plugin = []byte(plugin)
	log, err := logging.New(os.Stderr, logging.ComponentInstaller, logOpts)
	if err == nil && in.NodeConfig != "" {
		in.NodeConf, err = nodeconf.Parse([]byte(nodeConf))
		if err != nil {
			err = fmt.Errorf("--node-config-data: %w", err)
		}
	}
	if err != nil {
		return err
	}
	in.Log, asker.Log = log, log

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if keepFlows && !once {
		if ovsdbSocket == "" {
			return errors.New("--keep-flows needs --ovsdb-socket: the flows are rebuilt from the ports OVSDB holds")
		}
		if keeper.Period <= 0 {
			return fmt.Errorf("--keep-flows-period %s: must be positive", keeper.Period)
		}
		keeper.OVSDB, keeper.Log = ovsdbSocket, log
		go keeper.Run(ctx)
	}
	if ovsdbSocket != "" && asker.Path != "" && !once {
		if asker.Period <= 0 {
			return fmt.Errorf("--ovs-period %s: must be positive", asker.Period)
		}
		asker.OVS = &nodecheck.OVSDB{Socket: ovsdbSocket}
		go asker.run(ctx)
	}
	install := in.Run
	if once {
		install = func(context.Context) error { return in.Once() }
	}
	return install(ctx)
}
