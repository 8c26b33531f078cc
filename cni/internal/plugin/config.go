package plugin

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/cni/internal/nodeconf"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Defaults of the node contract (see cni/README.md): the dataplane mounts the pod's emptyDir
// VhostVolume at PodSocketDir inside the pod; on the host, <SocketRoot>/<pod UID> is a link to
// that emptyDir. SocketRoot and PodSocketDir are the pod contract's own constants, which the
// injector mounts: a second definition here could drift from them.
const (
	DefaultBridge        = "br-fstack"
	DefaultOVSDBSocket   = nodeconf.DefaultOVSDBSocket
	DefaultSocketRoot    = nodeconf.DefaultSocketRoot
	DefaultPodSocketDir  = podcontract.PodSocketDir
	DefaultDeviceInfoDir = nodeconf.DefaultDeviceInfoDir
	// DefaultKubeletRootDir is the kubelet's --root-dir, where it keeps the pod's emptyDir
	// VhostVolume that the socket root's link of the pod leads to.
	DefaultKubeletRootDir = nodeconf.DefaultKubeletRootDir
	DefaultLogFile        = nodeconf.DefaultLogFile
	DefaultMTU            = 1500

	// maxSocketPath is what fits in sockaddr_un.sun_path (108 bytes with the NUL).
	maxSocketPath = 107
	pluginType    = antispoof.Owner
)

// NetConf is the plugin's configuration (the network config on stdin).
type NetConf struct {
	types.PluginConf
	Bridge         string `json:"bridge,omitempty"`
	OVSDBSocket    string `json:"ovsdbSocket,omitempty"`
	SocketRoot     string `json:"socketRoot,omitempty"`
	PodSocketDir   string `json:"podSocketDir,omitempty"`
	DeviceInfoDir  string `json:"deviceInfoDir,omitempty"`
	KubeletRootDir string `json:"kubeletRootDir,omitempty"`
	// SkipUnprepared, in a chained conflist (which runs for every pod of the node), passes the
	// previous result through for a pod without the emptyDir instead of failing its ADD.
	SkipUnprepared bool   `json:"skipUnprepared,omitempty"`
	MTU            int    `json:"mtu,omitempty"`
	MAC            string `json:"mac,omitempty"`
	LogFile        string `json:"logFile,omitempty"`
	// LogFormat and LogLevel are the log's format (text or json) and level, as every
	// kube-fstack binary's --log-format and --log-level (internal/logging).
	LogFormat     string        `json:"logFormat,omitempty"`
	LogLevel      string        `json:"logLevel,omitempty"`
	RuntimeConfig runtimeConfig `json:"runtimeConfig,omitzero"`

	// RetiredQueues and RetiredQueueSize are keys fstack-cni no longer takes (retiredKeys): kept
	// only to refuse an ADD that sets them. Decoding matches them as it matched the old fields,
	// in any letter case.
	RetiredQueues    json.RawMessage `json:"queues,omitempty"`
	RetiredQueueSize json.RawMessage `json:"queueSize,omitempty"`

	// named are the node paths the config itself names (node.go): they must be the node's.
	named []nodeconf.Field
}

// retiredKeys refuses an ADD whose config still sets a key the plugin once took, naming the key
// and where its job is done now. queues and queueSize were only copied into the device info,
// which nothing read: the pod's DPDK opens the port's virtio queues from the StackInstance (the
// supervisor renders queues= and queue_size= into the vdev) and OVS's dpdkvhostuserclient port
// takes the count the guest negotiates, so a NetworkAttachmentDefinition's queues: 4 did
// nothing. Refusing it, instead of ignoring it, tells whoever wrote it that it never worked.
// DEL, CHECK, GC and STATUS still accept such a config: pods attached before the upgrade must
// still be checked and torn down.
func (c *NetConf) retiredKeys() error {
	for _, k := range []struct {
		name, def string
		raw       json.RawMessage
	}{{"queues", "one queue pair per process serving the port", c.RetiredQueues},
		{"queueSize", "DPDK's 256", c.RetiredQueueSize}} {
		if len(k.raw) == 0 {
			continue
		}
		return fmt.Errorf("%s is set in the network config, which fstack-cni no longer takes: the pod's DPDK opens the "+
			"vhost-user port's queues and OVS follows what it negotiates, so set spec.ports[].device.vhostUser.%s in the "+
			"StackInstance (default: %s) and remove %s from the network config "+
			"(the NetworkAttachmentDefinition's spec.config, or the node's conflist)", k.name, k.name, k.def, k.name)
	}
	return nil
}

// runtimeConfig carries the capabilities the plugin honours: "mac", "ips" (static addresses,
// which replace IPAM) and the NPWG "CNIDeviceInfoFile". Multus passes mac and ips from the
// pod's networks entry when the network's config declares those capabilities; it passes
// CNIDeviceInfoFile only to a network with a device-plugin resource (it sets the path when the
// delegate has a device ID), which an fstack-cni network never has, so in practice the plugin
// writes the device info at its own path under deviceInfoDir and Multus does not read it.
type runtimeConfig struct {
	MAC               string   `json:"mac,omitempty"`
	IPs               []string `json:"ips,omitempty"`
	CNIDeviceInfoFile string   `json:"CNIDeviceInfoFile,omitempty"`
}

// maxStaticIPs bounds runtimeConfig.ips: a port has one IPv4 and one IPv6 address.
const maxStaticIPs = 16

// parseConf decodes, defaults and validates the network config. The prevResult stays raw:
// parsePrevResult decodes it for the commands that use it.
func parseConf(stdin []byte) (*NetConf, error) {
	if len(stdin) > MaxStdin {
		return nil, types.NewError(types.ErrDecodingFailure,
			fmt.Sprintf("the network config on stdin is larger than %d bytes", MaxStdin), "a network config is a few kilobytes; check what the runtime sends")
	}
	conf := &NetConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "malformed network config JSON", err.Error())
	}
	conf.named = conf.nodePathsNamed()
	conf.applyDefaults()
	if err := conf.validate(); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	return conf, nil
}

// MaxStdin bounds the network config a command accepts: a real one, prevResult and valid
// attachments of a busy node included, is tens of kilobytes.
const MaxStdin = 1 << 20

// parsePrevResult decodes prevResult into a result of the config's version. ADD and CHECK read
// it; DEL does not, and every DEL a runtime sends carries the cached ADD result there, whose
// decoding (re-encode, then into the result types) cost an eighth of a DEL's CPU time.
func (c *NetConf) parsePrevResult() error {
	if err := version.ParsePrevResult(&c.PluginConf); err != nil {
		return types.NewError(types.ErrDecodingFailure, "malformed prevResult", err.Error())
	}
	return nil
}

func (c *NetConf) applyDefaults() {
	setDefault(&c.Bridge, DefaultBridge)
	setDefault(&c.OVSDBSocket, DefaultOVSDBSocket)
	setDefault(&c.SocketRoot, DefaultSocketRoot)
	setDefault(&c.PodSocketDir, DefaultPodSocketDir)
	setDefault(&c.DeviceInfoDir, DefaultDeviceInfoDir)
	setDefault(&c.KubeletRootDir, DefaultKubeletRootDir)
	setDefault(&c.LogFile, DefaultLogFile)
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
}

func setDefault(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func (c *NetConf) validate() error {
	switch {
	case c.Type != "" && c.Type != pluginType:
		return fmt.Errorf("type is %q, this plugin is %q", c.Type, pluginType)
	case !filepath.IsAbs(c.SocketRoot) || !filepath.IsAbs(c.PodSocketDir):
		return fmt.Errorf("socketRoot %q and podSocketDir %q must be absolute paths", c.SocketRoot, c.PodSocketDir)
	case !filepath.IsAbs(c.DeviceInfoDir):
		return fmt.Errorf("deviceInfoDir %q must be an absolute path", c.DeviceInfoDir)
	case !filepath.IsAbs(c.KubeletRootDir):
		return fmt.Errorf("kubeletRootDir %q must be an absolute path (the kubelet's --root-dir)", c.KubeletRootDir)
	case c.RuntimeConfig.CNIDeviceInfoFile != "" && !filepath.IsAbs(c.RuntimeConfig.CNIDeviceInfoFile):
		return fmt.Errorf("runtimeConfig.CNIDeviceInfoFile %q must be an absolute path", c.RuntimeConfig.CNIDeviceInfoFile)
	case c.MTU < 68 || c.MTU > 9702:
		return fmt.Errorf("mtu is %d, want 68..9702", c.MTU)
	case strings.ContainsAny(c.Bridge, " \t\n\"") || c.Bridge == "":
		return fmt.Errorf("bridge %q is not a valid OVS bridge name", c.Bridge)
	case c.LogFormat != "" && c.LogFormat != logging.FormatText && c.LogFormat != logging.FormatJSON:
		return fmt.Errorf("logFormat is %q, want %s or %s", c.LogFormat, logging.FormatText, logging.FormatJSON)
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("logLevel is %q, want debug, info, warn or error", c.LogLevel)
	}
	for _, m := range []string{c.MAC, c.RuntimeConfig.MAC} {
		if _, err := parseUnicastMAC(m); m != "" && err != nil {
			return err
		}
	}
	_, err := c.staticIPs()
	return err
}

// staticIPs parses runtimeConfig.ips: each an address with its prefix length (10.99.0.10/24),
// which is what the interface gets instead of an IPAM lease.
func (c *NetConf) staticIPs() ([]*current.IPConfig, error) {
	ips := c.RuntimeConfig.IPs
	if len(ips) > maxStaticIPs {
		return nil, fmt.Errorf("runtimeConfig.ips has %d addresses, at most %d are accepted", len(ips), maxStaticIPs)
	}
	out := make([]*current.IPConfig, 0, len(ips))
	for _, s := range ips {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("runtimeConfig.ips: %q is not an address with a prefix length (e.g. 10.99.0.10/24): set the port's address in CIDR form", s)
		}
		out = append(out, &current.IPConfig{Address: net.IPNet{IP: ip, Mask: n.Mask}})
	}
	return out, nil
}

func parseUnicastMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 || mac[0]&1 != 0 {
		return nil, fmt.Errorf("mac %q is not a unicast Ethernet address", s)
	}
	return mac, nil
}

// podArgs are the Kubernetes facts runtimes pass in CNI_ARGS.
type podArgs struct {
	Namespace, Name, UID, InfraContainerID string
}

// parseCNIArgs reads "K=V;K=V". It is hand-rolled because the keys (K8S_POD_UID ...) are not Go
// names, and unknown keys must be ignored anyway.
func parseCNIArgs(s string) podArgs {
	var a podArgs
	for _, kv := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAMESPACE":
			a.Namespace = v
		case "K8S_POD_NAME":
			a.Name = v
		case "K8S_POD_UID":
			a.UID = v
		case "K8S_POD_INFRA_CONTAINER_ID":
			a.InfraContainerID = v
		}
	}
	return a
}

// validPodUID guards the one CNI_ARGS value that becomes a path element.
func validPodUID(uid string) error {
	if uid == "" {
		return fmt.Errorf("K8S_POD_UID is missing from CNI_ARGS: the runtime must pass it (kubelet runtimes and Multus do)")
	}
	if strings.ContainsAny(uid, "/\x00") || uid == "." || uid == ".." || len(uid) > 64 {
		return fmt.Errorf("K8S_POD_UID %q cannot name a directory", uid)
	}
	return nil
}
