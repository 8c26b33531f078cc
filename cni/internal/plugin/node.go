package plugin

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// nodeConfigPath is where New reads the node config: nodeconf.Path, and only a test build
// (-ldflags -X) names another, since no network config may.
var nodeConfigPath = nodeconf.Path

// The node's paths come from the node config (nodeconf), never from the network config: fstack-cni
// runs as root on the host, and whoever may write a NetworkAttachmentDefinition in a tenant
// namespace (or the conflist) writes the network config. A logFile of /etc/ld.so.preload would
// have the plugin append its log lines there, a CNIDeviceInfoFile naming any file would have it
// replaced by JSON. A network config may still name a node path when it names the node's own
// value (the configs older charts rendered did); ADD and CHECK refuse any other, DEL, GC and
// STATUS use the node's and log the difference, so what was attached before is still removed.

// nodePathsNamed records the node paths the network config names, before defaults hide which
// were named.
func (c *NetConf) nodePathsNamed() []nodeconf.Field {
	var named []nodeconf.Field
	for _, f := range (&nodeconf.Conf{OVSDBSocket: c.OVSDBSocket, SocketRoot: c.SocketRoot, KubeletRootDir: c.KubeletRootDir,
		DeviceInfoDir: c.DeviceInfoDir, LogFile: c.LogFile}).Paths() {
		if f.Value != "" {
			named = append(named, f)
		}
	}
	return named
}

// nodeConflicts says which node path the network config names other than the node's, or
// which runtimeConfig.CNIDeviceInfoFile is not directly in the node's device-info directory.
func (c *NetConf) nodeConflicts(node *nodeconf.Conf, from string) error {
	have := map[string]string{}
	for _, f := range node.Paths() {
		have[f.Name] = f.Value
	}
	var wrong []string
	for _, f := range c.named {
		if filepath.Clean(f.Value) != have[f.Name] {
			wrong = append(wrong, fmt.Sprintf("%s %q in the network config is not this node's %s %q (%s): fstack-cni takes the node's paths from "+
				"the node only; remove %s from the network config (the NetworkAttachmentDefinition's spec.config, or the node's "+
				"conflist), and set it on the node (chart values: see the kube-fstack chart's cni.nodeConfig)", f.Name, f.Value, f.Name, have[f.Name], from, f.Name))
		}
	}
	if len(wrong) > 0 {
		return errors.New(strings.Join(wrong, "; "))
	}
	if file := c.RuntimeConfig.CNIDeviceInfoFile; file != "" && !inDeviceInfoDir(file, node.DeviceInfoDir) {
		return fmt.Errorf("runtimeConfig.CNIDeviceInfoFile %q is not a file directly in the node's device-info directory %s (%s): "+
			"fstack-cni writes device info only there; the runtime (Multus) must pass a path in it, or none", file, node.DeviceInfoDir, from)
	}
	return nil
}

// inDeviceInfoDir holds a runtime's device-info path to Multus's layout: one file directly in
// the device-info directory, judged on the cleaned path, so no ".." or extra level leaves it.
// The file is then written by name in the directory, replacing (never following) a symlink.
func inDeviceInfoDir(file, dir string) bool {
	clean := filepath.Clean(file)
	return filepath.IsAbs(file) && filepath.Dir(clean) == dir && fsutil.PlainName(filepath.Base(clean)) == nil
}

// useNode replaces every node path of the config with the node's.
func (c *NetConf) useNode(node *nodeconf.Conf) {
	c.OVSDBSocket, c.SocketRoot, c.KubeletRootDir = node.OVSDBSocket, node.SocketRoot, node.KubeletRootDir
	c.DeviceInfoDir, c.LogFile = node.DeviceInfoDir, node.LogFile
	if c.RuntimeConfig.CNIDeviceInfoFile != "" && !inDeviceInfoDir(c.RuntimeConfig.CNIDeviceInfoFile, node.DeviceInfoDir) {
		c.RuntimeConfig.CNIDeviceInfoFile = "" // DEL and GC: the plugin never wrote there
	} else if c.RuntimeConfig.CNIDeviceInfoFile != "" {
		c.RuntimeConfig.CNIDeviceInfoFile = filepath.Clean(c.RuntimeConfig.CNIDeviceInfoFile)
	}
}

// loadNode reads the node config; without a usable one the node's values are the defaults,
// which DEL, GC and STATUS work with, and loadErr says why ADD serves no pod.
func (p *Plugin) loadNode() (node *nodeconf.Conf, loadErr error) {
	path := p.NodeConfig
	if path == "" {
		path = nodeconf.Path
	}
	node, err := nodeconf.Load(path, p.NodeConfigOwner)
	if err == nil {
		return node, nil
	}
	if errors.Is(err, nodeconf.ErrMissing) {
		err = fmt.Errorf("%w: the kube-fstack CNI DaemonSet's installer writes %s on every node (chart value cni.nodeConfig.enabled); "+
			"wait for it to run on this node, or write it as root (cni/README.md, the node config)", err, path)
	}
	return nodeconf.Default(), err
}

// servable is ADD's check, before anything is taken, that this node serves the pod: its node
// config is there and lists the pod's namespace. A pod of another namespace can declare an
// emptyDir fstack-vhost as well as an injected one, and in a chained conflist fstack-cni runs
// for every pod of the node, none of which the injector saw.
func (c *command) servable(a *attachment) error {
	if c.nodeErr != nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "fstack-cni serves no pod on this node: "+c.nodeErr.Error(), "")
	}
	if !c.node.Serves(a.Pod.Namespace) {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("pod %s/%s: namespace %q is not one fstack-cni serves on this node "+
			"(the node config's namespaces: %v): list the namespace in the chart value cni.nodeConfig.namespaces, the namespaces "+
			"labelled kubefstack.io/injection=enabled", a.Pod.Namespace, a.Pod.Name, a.Pod.Namespace, c.node.Namespaces), "")
	}
	return nil
}

// nodeConfigName names where the node's values came from, for messages.
func (p *Plugin) nodeConfigName() string {
	if p.NodeConfig == "" {
		return "the node config " + nodeconf.Path
	}
	return "the node config " + p.NodeConfig
}

// NodeConfigLDFlag is the -ldflags argument that builds fstack-cni reading its node config at
// path instead of nodeconf.Path: for the node tests and the benchmark, which run the plugin on
// a node of their own beside the machine's.
func NodeConfigLDFlag(path string) string {
	return "-X github.com/kube-fstack/kube-fstack/cni/internal/plugin.nodeConfigPath=" + path
}
