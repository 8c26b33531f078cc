package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/kube-fstack/kube-fstack/cni/internal/antispoof"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// attachment is everything derived from one CNI call: names, paths and identity.
type attachment struct {
	Network     string
	ContainerID string
	IfName      string
	Netns       string
	Pod         podArgs
	PortName    string
	Root        string // the socket root PodDir is in
	PodDir      string // <socketRoot>/<pod UID> on the host: the pod's link (a directory in the old layout)
	KubeletRoot string // the kubelet's root dir Volume is in
	Volume      string // the pod's emptyDir VhostVolume on the host, PodDir's target
	Socket      string // the socket on the host (OVS's vhost-server-path)
	PodSocket   string // the same socket as the pod sees it
	DevInfoFile string // the NPWG CNI device-info file
	MAC         string
	// Binding is what the port's anti-spoofing rules bind (ADD decides it, binding.go).
	Binding   antispoof.Spec
	claims    []claim // Binding's addresses and where each came from
	podDirErr error   // why PodDir is empty: the directory asked for is not beneath the root
}

// portName is short (15 bytes, like a kernel ifname) and a pure function of the attachment, so
// DEL can find the port with no cached state.
func portName(containerID, ifname string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifname))
	return portPrefix + hex.EncodeToString(sum[:6])
}

const portPrefix = "fsk"

// stableMAC is locally administered and unicast, and the same on every ADD of the pod's
// interface, so a restarted sandbox keeps its neighbours' ARP entries valid.
func stableMAC(podUID, ifname string) string {
	sum := sha256.Sum256([]byte(podUID + "/" + ifname))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = (mac[0] | 0x02) &^ 0x01
	return mac.String()
}

// newAttachment derives the attachment; podUID may be empty for DEL and GC.
func newAttachment(conf *NetConf, args *skel.CmdArgs, pod podArgs) *attachment {
	a := &attachment{
		Network: conf.Name, ContainerID: args.ContainerID, IfName: args.IfName, Netns: args.Netns,
		Pod: pod, PortName: portName(args.ContainerID, args.IfName),
		DevInfoFile: conf.RuntimeConfig.CNIDeviceInfoFile,
	}
	if a.DevInfoFile == "" {
		name := fmt.Sprintf("%s-%s-%s-device-info.json", conf.Name, args.ContainerID, args.IfName)
		a.DevInfoFile = filepath.Join(conf.DeviceInfoDir, strings.ReplaceAll(name, "/", "-"))
	}
	if pod.UID != "" {
		a.setPodDir(conf, filepath.Join(conf.SocketRoot, pod.UID))
	}
	a.MAC = firstNonEmpty(conf.RuntimeConfig.MAC, conf.MAC, stableMAC(pod.UID, args.IfName))
	return a
}

// setPodDir places the attachment's files in dir, which must be a pod directory directly
// beneath the socket root: else PodDir and Socket stay empty and podDirErr says why, and no file
// of the attachment is touched.
func (a *attachment) setPodDir(conf *NetConf, dir string) {
	a.placeIn(conf, conf.SocketRoot, dir)
}

// setPodDirOfPort places the files where the port's socket says ADD put them, which wins over
// today's config: the socket root is the socket's grandparent. OVSDB is not the pods' to
// write, and even so only files that describe the attachment are ever removed.
func (a *attachment) setPodDirOfPort(conf *NetConf, socket string) {
	dir := filepath.Dir(filepath.Clean(socket))
	if filepath.Base(socket) != podcontract.VhostSocketFile(a.IfName) {
		a.PodDir, a.Socket, a.podDirErr = "", "", fmt.Errorf("socket %s is not named after interface %q", socket, a.IfName)
		return
	}
	a.placeIn(conf, filepath.Dir(dir), dir)
}

func (a *attachment) placeIn(conf *NetConf, root, dir string) {
	a.Root, a.PodDir, a.Socket, a.KubeletRoot, a.Volume, a.podDirErr = "", "", "", "", "", podDirBeneath(root, dir)
	if a.podDirErr == nil {
		a.Root, a.PodDir = filepath.Clean(root), filepath.Clean(dir)
		a.Socket = filepath.Join(a.PodDir, podcontract.VhostSocketFile(a.IfName))
		a.KubeletRoot = filepath.Clean(conf.KubeletRootDir)
		a.Volume = filepath.Join(a.KubeletRoot, volumeRel(filepath.Base(a.PodDir)))
	}
	a.PodSocket = filepath.Join(conf.PodSocketDir, podcontract.VhostSocketFile(a.IfName))
}

func (a *attachment) devInfoInPodDir() string {
	return filepath.Join(a.PodDir, podcontract.DevInfoFile(a.IfName))
}

func (a *attachment) checkSocketPath() error {
	for _, p := range []string{a.Socket, a.PodSocket} {
		if len(p) > maxSocketPath {
			return fmt.Errorf("vhost-user socket path %q is %d bytes, a unix socket path holds at most %d: shorten socketRoot/podSocketDir or the interface name", p, len(p), maxSocketPath)
		}
	}
	return nil
}

func (a *attachment) portSpec(mtu int) *portSpec {
	spec := &portSpec{Name: a.PortName, Socket: a.Socket, MTU: mtu, IDs: map[string]string{
		podcontract.OVSIDOwner: pluginType, podcontract.OVSIDNetwork: a.Network, podcontract.OVSIDContainerID: a.ContainerID, podcontract.OVSIDIfName: a.IfName,
		podcontract.OVSIDPodNamespace: a.Pod.Namespace, podcontract.OVSIDPodName: a.Pod.Name, podcontract.OVSIDPodUID: a.Pod.UID,
		podcontract.OVSIDMAC: a.MAC,
	}}
	// The port records what its rules bind, which the flow keeper rebuilds them from.
	if a.Binding.MAC == "" {
		return spec // not decided (ADD decides it before it makes the port)
	}
	for k, v := range a.Binding.IDs() {
		spec.IDs[k] = v
	}
	for _, addr := range a.Binding.Addrs {
		spec.IDs[idHolds+addr.String()] = idHeld
	}
	return spec
}

// portSpec is the OVS port an ADD creates.
type portSpec struct {
	Name   string
	Socket string
	MTU    int
	IDs    map[string]string
	// OFPort is the OpenFlow port number the port requests (ofport.go).
	OFPort int64
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
