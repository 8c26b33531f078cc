// Command vsctl-cni is the benchmark's baseline: a CNI plugin that makes the same attachment as
// fstack-cni (pod directory, device info in it and at the NPWG path, a dpdkvhostuserclient port
// with the same external_ids and tx steering) the way userspace-cni does, by exec'ing ovs-vsctl. The runtime
// execs it once per ADD and once per DEL, exactly as it execs fstack-cni, so the two differ only
// in how they talk to OVS.
//
// It is deliberately lean, so the comparison flatters the exec approach rather than fstack-cni:
// one ovs-vsctl per command (userspace-cni also runs a bridge lookup first), no IPAM, no log
// file, no bridge type check, and DEL finds the files from CNI_ARGS instead of asking OVS.
// "noWait" adds --no-wait: ovs-vsctl then returns once OVSDB has committed, like fstack-cni,
// instead of waiting for ovs-vswitchd to apply the change (userspace-cni's default).
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

type netConf struct {
	types.PluginConf
	Bridge        string `json:"bridge"`
	OVSDBSocket   string `json:"ovsdbSocket"`
	SocketRoot    string `json:"socketRoot"`
	PodSocketDir  string `json:"podSocketDir"`
	DeviceInfoDir string `json:"deviceInfoDir"`
	NoWait        bool   `json:"noWait"`
}

// attachment is what both commands derive from their arguments.
type attachment struct {
	conf                              *netConf
	args                              *skel.CmdArgs
	uid, namespace, name              string
	port, podDir, socket, devInfoFile string
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: add, Del: del}, version.All, "vsctl-cni: the ovs-vsctl exec baseline of the fstack-cni benchmark")
}

func load(args *skel.CmdArgs) (*attachment, error) {
	conf := &netConf{PodSocketDir: "/var/run/kube-fstack/vhost"}
	if err := json.Unmarshal(args.StdinData, conf); err != nil {
		return nil, err
	}
	a := &attachment{conf: conf, args: args}
	for _, kv := range strings.Split(args.Args, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_UID":
			a.uid = v
		case "K8S_POD_NAMESPACE":
			a.namespace = v
		case "K8S_POD_NAME":
			a.name = v
		}
	}
	if a.uid == "" {
		return nil, errors.New("K8S_POD_UID missing")
	}
	sum := sha256.Sum256([]byte(args.ContainerID + "/" + args.IfName))
	a.port = "vsc" + hex.EncodeToString(sum[:6])
	a.podDir = filepath.Join(conf.SocketRoot, a.uid)
	a.socket = filepath.Join(a.podDir, args.IfName+".sock")
	a.devInfoFile = filepath.Join(conf.DeviceInfoDir, fmt.Sprintf("%s-%s-%s-device-info.json", conf.Name, args.ContainerID, args.IfName))
	return a, nil
}

func add(args *skel.CmdArgs) error {
	a, err := load(args)
	if err != nil {
		return err
	}
	if err := a.writeFiles(); err != nil {
		return errors.Join(err, a.removeFiles())
	}
	if err := a.vsctl(a.addPortArgs()...); err != nil {
		return errors.Join(err, a.removeFiles())
	}
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion, Interfaces: []*current.Interface{
		{Name: args.IfName, Sandbox: args.Netns, SocketPath: a.socket}}}
	return types.PrintResult(res, a.conf.CNIVersion)
}

func del(args *skel.CmdArgs) error {
	a, err := load(args)
	if err != nil {
		return err
	}
	if err := a.vsctl("--if-exists", "del-port", a.conf.Bridge, a.port); err != nil {
		return err
	}
	return a.removeFiles()
}

func (a *attachment) writeFiles() error {
	if err := os.MkdirAll(a.podDir, 0o755); err != nil {
		return err
	}
	info := &podcontract.DevInfo{Type: podcontract.DevInfoTypeVhostUser, Version: podcontract.DevInfoVersion,
		VhostUser:  &podcontract.DevInfoVhostUser{Mode: podcontract.VhostUserModeServer, Path: filepath.Join(a.conf.PodSocketDir, a.args.IfName+".sock")},
		Attachment: &podcontract.DevInfoAttachment{Network: a.conf.Name, ContainerID: a.args.ContainerID, IfName: a.args.IfName, PodUID: a.uid}}
	if err := podcontract.WriteDevInfo(filepath.Join(a.podDir, a.args.IfName+".json"), info); err != nil {
		return err
	}
	return podcontract.WriteDevInfo(a.devInfoFile, info)
}

func (a *attachment) removeFiles() error {
	var errs []error
	for _, p := range []string{a.devInfoFile, filepath.Join(a.podDir, a.args.IfName+".json"), a.socket, a.podDir} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// addPortArgs creates the port and sets the same columns fstack-cni sets, in one ovs-vsctl
// transaction.
func (a *attachment) addPortArgs() []string {
	ids := []string{"owner=vsctl-cni", "network=" + a.conf.Name, "container-id=" + a.args.ContainerID,
		"ifname=" + a.args.IfName, "pod-namespace=" + a.namespace, "pod-name=" + a.name, "pod-uid=" + a.uid}
	iface := []string{"--", "set", "Interface", a.port, "type=dpdkvhostuserclient",
		"options:vhost-server-path=" + a.socket, "mtu_request=1500", "other_config:tx-steering=hash"}
	port := []string{"--", "set", "Port", a.port}
	for _, id := range ids {
		k, v, _ := strings.Cut(id, "=")
		iface = append(iface, fmt.Sprintf("external_ids:kube-fstack.io/%s=%q", k, v))
		port = append(port, fmt.Sprintf("external_ids:kube-fstack.io/%s=%q", k, v))
	}
	return append(append([]string{"add-port", a.conf.Bridge, a.port}, iface...), port...)
}

func (a *attachment) vsctl(args ...string) error {
	pre := []string{"--db=unix:" + a.conf.OVSDBSocket}
	if a.conf.NoWait {
		pre = append(pre, "--no-wait")
	}
	out, err := exec.Command("ovs-vsctl", append(pre, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ovs-vsctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
