package podcontract

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// Device info is the file format fstack-cni writes for each vhost-user attachment and the
// dataplane reads at start: the NPWG device-info spec (v1.1.0, type "vhost-user") plus the facts
// F-Stack's [portN] needs (MAC, addresses, gateway, MTU). It carries no virtio queue layout: the
// StackInstance owns it (spec.ports[].device.vhostUser), the pod's DPDK opens the queues, and
// OVS takes the count the guest negotiates, so a value here would be a second owner nobody reads.
//
// fstack-cni writes the same document twice: into the pod's socket directory as DevInfoFile
// (the dataplane reads it there, without Multus or the API server) and at the NPWG CNI
// device-info path, for tools that follow the NPWG convention. Multus (4.2) does not read it:
// it copies a device info into network-status only from the runtimeConfig.CNIDeviceInfoFile it
// passes, and it passes one only to a network with a device-plugin resource (a device ID),
// which a vhost-user network has not. network-status shows the CNI result instead: the
// interface, its MAC and the IPs, which fstack-cni makes the dataplane's own (runtimeConfig mac
// and ips from the pod's networks entry).
const (
	// DevInfoVersion is the NPWG device-info spec version written.
	DevInfoVersion = "1.1.0"
	// DevInfoTypeVhostUser is the device type of every attachment fstack-cni makes.
	DevInfoTypeVhostUser = "vhost-user"
	// VhostUserModeServer means the pod's side (DPDK virtio_user with server=1) owns the socket.
	VhostUserModeServer = "server"
	// VhostUserModeClient means OVS owns the socket.
	VhostUserModeClient = "client"
)

// DevInfoFile is the name of an attachment's device info in the pod's socket directory
// (PodSocketDir in the dataplane; on the node the pod's emptyDir VhostVolume, which OVS reaches
// through the link HostSocketRoot/<pod UID>).
func DevInfoFile(ifname string) string { return ifname + ".json" }

// VhostSocketFile is the name of an attachment's vhost-user socket in the same directory.
func VhostSocketFile(ifname string) string { return ifname + ".sock" }

// DevInfo is one attachment's device information.
type DevInfo struct {
	Type      string            `json:"type"`
	Version   string            `json:"version"`
	VhostUser *DevInfoVhostUser `json:"vhost-user,omitempty"`

	MAC     string   `json:"mac,omitempty"`
	IPs     []string `json:"ips,omitempty"` // CIDR strings, e.g. "10.1.0.5/24"
	Gateway string   `json:"gateway,omitempty"`
	MTU     int      `json:"mtu,omitempty"`
	// SwitchCPUs are the CPUs the switch's poll-mode threads busy-poll on (OVS-DPDK's
	// other_config:pmd-cpu-mask on the node), ascending; empty when the switch pins none. The
	// dataplane keeps its lcores and the app's workers off them where its cpuset allows: a
	// busy-polling lcore that shares a CPU with a PMD thread gets half of it.
	SwitchCPUs []int `json:"switchCPUs,omitempty"`

	// Attachment names the CNI attachment that owns this file, so garbage collection can tell
	// live files from leftovers without asking anyone.
	Attachment *DevInfoAttachment `json:"attachment,omitempty"`
}

// DevInfoVhostUser is the "vhost-user" member of the NPWG format.
type DevInfoVhostUser struct {
	Mode string `json:"mode"`
	Path string `json:"path"` // the socket as the pod sees it
}

// DevInfoAttachment identifies a CNI attachment.
type DevInfoAttachment struct {
	Network     string `json:"network"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
	PodUID      string `json:"podUID,omitempty"`
}

// Validate checks what a reader relies on.
func (i *DevInfo) Validate() error {
	switch {
	case i.Type != DevInfoTypeVhostUser:
		return fmt.Errorf("devinfo: type %q, want %q", i.Type, DevInfoTypeVhostUser)
	case i.VhostUser == nil || i.VhostUser.Path == "":
		return fmt.Errorf("devinfo: vhost-user.path is missing")
	case i.VhostUser.Mode != VhostUserModeServer && i.VhostUser.Mode != VhostUserModeClient:
		return fmt.Errorf("devinfo: vhost-user.mode %q is neither server nor client", i.VhostUser.Mode)
	}
	if err := checkCPUList(i.SwitchCPUs); err != nil {
		return fmt.Errorf("devinfo: switchCPUs: %w", err)
	}
	return checkSocketPath(i.VhostUser.Path)
}

// MaxCPU is the highest CPU number a CPU list of the pod contract may name: Linux's NR_CPUS is
// at most 8192.
const MaxCPU = 8191

// checkCPUList holds a list of CPU numbers to what fstack-cni writes: ascending, no duplicate,
// each 0-MaxCPU.
func checkCPUList(cpus []int) error {
	for k, c := range cpus {
		if c < 0 || c > MaxCPU {
			return fmt.Errorf("CPU %d is not a CPU number (0-%d)", c, MaxCPU)
		}
		if k > 0 && c <= cpus[k-1] {
			return fmt.Errorf("%v is not ascending without duplicates", cpus)
		}
	}
	return nil
}

func socketPathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/._-", c) >= 0
}

// checkSocketPath holds the socket path to what fstack-cni writes (podSocketDir/<ifname>.sock):
// the renderer pastes it verbatim into config.ini and into the EAL's virtio_user devargs, where a
// ',' or '=' would add devargs of the pod's choosing and a ';' or '#' would end the ini value.
func checkSocketPath(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("devinfo: vhost-user.path %q is not an absolute, clean path", p)
	}
	for _, c := range []byte(p) {
		if !socketPathByte(c) {
			return fmt.Errorf("devinfo: vhost-user.path %q has %q: only letters, digits and / . _ - (EAL devargs split on , and =)", p, c)
		}
	}
	return nil
}

// DevInfoMaxSize bounds what ReadDevInfo and ParseDevInfo accept: a real document is a few
// hundred bytes, and the pod directory it lives in is writable by the pod.
const DevInfoMaxSize = 64 << 10

// ReadDevInfo loads and validates the file at path.
func ReadDevInfo(path string) (*DevInfo, error) {
	d, err := fsutil.OpenDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("devinfo: %w", err)
	}
	defer d.Close()
	return ReadDevInfoIn(d, filepath.Base(path))
}

// ReadDevInfoIn loads and validates the regular file name in d, never through a symlink.
func ReadDevInfoIn(d *fsutil.Dir, name string) (*DevInfo, error) {
	data, err := d.ReadFile(name, DevInfoMaxSize)
	if err != nil {
		return nil, fmt.Errorf("devinfo: %w", err)
	}
	info, err := ParseDevInfo(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, d.Join(name))
	}
	return info, nil
}

// ParseDevInfo decodes and validates one document.
func ParseDevInfo(data []byte) (*DevInfo, error) {
	if len(data) > DevInfoMaxSize {
		return nil, fmt.Errorf("devinfo: %d bytes, at most %d", len(data), DevInfoMaxSize)
	}
	var info DevInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("devinfo: %w", err)
	}
	if err := info.Validate(); err != nil {
		return nil, err
	}
	return &info, nil
}

// WriteDevInfo stores info at path atomically (fsutil.WriteAtomic: never through a symlink,
// temp file, fsync, rename), creating the parent directory, so a reader never sees half a file.
// The fsyncs cost nothing on /var/run, a tmpfs on every node.
func WriteDevInfo(path string, info *DevInfo) error {
	data, err := EncodeDevInfo(info)
	if err != nil {
		return err
	}
	if err := fsutil.WriteAtomic(path, data, DevInfoFileMode); err != nil {
		return fmt.Errorf("devinfo: %w", err)
	}
	return nil
}

// DevInfoFileMode is the device info's mode: the dataplane may read it as another user.
const DevInfoFileMode = 0o644

// EncodeDevInfo validates info and returns what WriteDevInfo stores, so a writer of the same
// document to several places encodes it once (and writes it with fsutil.Dir.WriteAtomic and
// DevInfoFileMode).
func EncodeDevInfo(info *DevInfo) ([]byte, error) {
	if err := info.Validate(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("devinfo: %w", err)
	}
	return append(data, '\n'), nil
}
