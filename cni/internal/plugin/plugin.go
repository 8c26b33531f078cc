// Package plugin implements fstack-cni: a CNI plugin that gives a pod a vhost-user port on an
// OVS-DPDK netdev bridge. OVS is the vhost-user client; the pod's DPDK (F-Stack) is the server of
// the socket <socketRoot>/<K8S_POD_UID>/<ifname>.sock, which the dataplane container mounts at
// <podSocketDir>. The attachment's device info (devinfo package) is written beside the socket as
// <ifname>.json and at the NPWG CNI device-info path.
package plugin

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/internal/logging"
)

// Plugin runs the CNI commands. Its fields are the dependencies tests replace.
type Plugin struct {
	// Timeout bounds a whole command, so a hung OVSDB cannot hang the runtime.
	Timeout time.Duration
	// IPAM runs the IPAM plugin named in the config.
	IPAM IPAM
	// Stderr receives log lines when the log file cannot be opened.
	Stderr io.Writer
	// MaxLogSize is the log's size at which it is rotated; 0 means DefaultMaxLogSize.
	MaxLogSize int64
	// Flows sets and removes each port's anti-spoofing rules on the bridge.
	Flows Flows
	// NodeConfig is the node config's path (empty: nodeconf.Path), NodeConfigOwner the uid it
	// must be owned by (root's on a node).
	NodeConfig      string
	NodeConfigOwner int
}

// New returns a Plugin wired to the real world.
func New() *Plugin {
	return &Plugin{Timeout: 60 * time.Second, IPAM: execIPAM{}, Stderr: os.Stderr, Flows: openflowFlows{OFPortWait: 30_000},
		NodeConfig: nodeConfigPath}
}

// Funcs returns the skel callbacks.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, Status: p.Status, GC: p.GC}
}

// command is the state every CNI command starts from.
type command struct {
	ctx    context.Context
	conf   *NetConf
	log    *slog.Logger
	ovs    *ovs
	flows  Flows
	closer func()
	// node is the node config (the defaults when there is none); nodeErr says why there is
	// none, which ADD refuses to serve without.
	node    *nodeconf.Conf
	nodeErr error
}

func (p *Plugin) start(stdin []byte, verb string) (*command, error) {
	conf, err := parseConf(stdin)
	if err != nil {
		return nil, err
	}
	if verb == "ADD" {
		// Before anything is taken or logged: a refused ADD leaves nothing behind.
		if err := conf.retiredKeys(); err != nil {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
		}
	}
	node, nodeErr := p.loadNode()
	from := p.nodeConfigName()
	if nodeErr != nil {
		from = "fstack-cni's default: the node config is unusable"
	}
	conflict := conf.nodeConflicts(node, from)
	// Without a node config ADD and CHECK serve nothing (servable), but a chain's pod that is no
	// F-Stack pod still passes through: only the defaults are used, and nothing is written.
	if conflict != nil && nodeErr == nil && (verb == "ADD" || verb == "CHECK") {
		// Before anything is logged: the log file is one of the paths in question.
		return nil, types.NewError(types.ErrInvalidNetworkConfig, conflict.Error(), "")
	}
	conf.useNode(node)
	if verb == "ADD" || verb == "CHECK" {
		if err := conf.parsePrevResult(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	logOpts := logging.Options{Format: conf.LogFormat, Level: conf.LogLevel}
	logger, closeLog := newLogger(p.Stderr, logOpts), func() {}
	if nodeErr == nil { // else no file is the node's to write: the runtime keeps stderr
		logger, closeLog = p.openLog(conf.LogFile, logOpts)
	}
	cmd := &command{ctx: ctx, conf: conf, ovs: &ovs{path: conf.OVSDBSocket}, flows: p.Flows,
		log: logger.With("cmd", verb, "network", conf.Name), node: node, nodeErr: nodeErr}
	if conflict != nil {
		cmd.log.Warn("the node's paths used, not the network config's", logging.KeyErr, conflict)
	}
	cmd.closer = func() { cmd.ovs.close(); cancel(); closeLog() }
	return cmd, nil
}

// logResult records how a command ended and returns err unchanged.
func (c *command) logResult(err error, attrs ...any) error {
	if err != nil {
		c.log.Error("failed", append(attrs, logging.KeyErr, err)...)
	} else {
		c.log.Info("done", attrs...)
	}
	return err
}
