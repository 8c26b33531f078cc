// Package devinfo is the file format fstack-cni writes for each vhost-user attachment and the
// dataplane reads at start: the NPWG device-info spec (v1.1.0, type "vhost-user") plus the facts
// F-Stack's [portN] needs (MAC, addresses, gateway, MTU) and the virtio queue layout.
//
// fstack-cni writes the same document twice: into the pod's socket directory as <ifname>.json
// (the dataplane reads it there, without Multus or the API server) and at the NPWG CNI
// device-info path (Multus copies it into the pod's network-status annotation).
package devinfo

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

const (
	// SpecVersion is the NPWG device-info spec version written.
	SpecVersion = "1.1.0"
	// TypeVhostUser is the device type of every attachment fstack-cni makes.
	TypeVhostUser = "vhost-user"
	// ModeServer means the pod's side (DPDK virtio_user with server=1) owns the socket.
	ModeServer = "server"
)

// Info is one attachment's device information.
type Info struct {
	Type      string     `json:"type"`
	Version   string     `json:"version"`
	VhostUser *VhostUser `json:"vhost-user,omitempty"`

	MAC       string   `json:"mac,omitempty"`
	IPs       []string `json:"ips,omitempty"` // CIDR strings, e.g. "10.1.0.5/24"
	Gateway   string   `json:"gateway,omitempty"`
	MTU       int      `json:"mtu,omitempty"`
	Queues    int      `json:"queues,omitempty"`
	QueueSize int      `json:"queueSize,omitempty"`

	// Attachment names the CNI attachment that owns this file, so garbage collection can tell
	// live files from leftovers without asking anyone.
	Attachment *Attachment `json:"attachment,omitempty"`
}

// VhostUser is the "vhost-user" member of the NPWG format.
type VhostUser struct {
	Mode string `json:"mode"`
	Path string `json:"path"` // the socket as the pod sees it
}

// Attachment identifies a CNI attachment.
type Attachment struct {
	Network     string `json:"network"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
	PodUID      string `json:"podUID,omitempty"`
}

// Validate checks what a reader relies on.
func (i *Info) Validate() error {
	switch {
	case i.Type != TypeVhostUser:
		return fmt.Errorf("devinfo: type %q, want %q", i.Type, TypeVhostUser)
	case i.VhostUser == nil || i.VhostUser.Path == "":
		return fmt.Errorf("devinfo: vhost-user.path is missing")
	case i.VhostUser.Mode != ModeServer && i.VhostUser.Mode != "client":
		return fmt.Errorf("devinfo: vhost-user.mode %q is neither server nor client", i.VhostUser.Mode)
	}
	return nil
}

// MaxSize bounds what Read and Parse accept: a real document is a few hundred bytes, and the
// pod directory it lives in is writable by the pod.
const MaxSize = 64 << 10

// Read loads and validates the file at path.
func Read(path string) (*Info, error) {
	d, err := fsutil.OpenDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("devinfo: %w", err)
	}
	defer d.Close()
	return ReadIn(d, filepath.Base(path))
}

// ReadIn loads and validates the regular file name in d, never through a symlink.
func ReadIn(d *fsutil.Dir, name string) (*Info, error) {
	data, err := d.ReadFile(name, MaxSize)
	if err != nil {
		return nil, fmt.Errorf("devinfo: %w", err)
	}
	info, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, d.Join(name))
	}
	return info, nil
}

// Parse decodes and validates one document.
func Parse(data []byte) (*Info, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("devinfo: %d bytes, at most %d", len(data), MaxSize)
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("devinfo: %w", err)
	}
	if err := info.Validate(); err != nil {
		return nil, err
	}
	return &info, nil
}

// Write stores info at path atomically (fsutil.WriteAtomic: never through a symlink, temp file,
// fsync, rename), creating the parent directory, so a reader never sees half a file. The fsyncs
// cost nothing on /var/run, a tmpfs on every node.
func Write(path string, info *Info) error {
	data, err := Encode(info)
	if err != nil {
		return err
	}
	if err := fsutil.WriteAtomic(path, data, FileMode); err != nil {
		return fmt.Errorf("devinfo: %w", err)
	}
	return nil
}

// FileMode is the device info's mode: the dataplane may read it as another user.
const FileMode = 0o644

// Encode validates info and returns what Write stores, so a writer of the same document to
// several places encodes it once (and writes it with fsutil.Dir.WriteAtomic and FileMode).
func Encode(info *Info) ([]byte, error) {
	if err := info.Validate(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("devinfo: %w", err)
	}
	return append(data, '\n'), nil
}
