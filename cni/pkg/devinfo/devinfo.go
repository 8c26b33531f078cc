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
	"os"
	"path/filepath"
)

const (
	// SpecVersion is the NPWG device-info spec version written.
	SpecVersion = "1.1.0"
	// TypeVhostUser is the device type of every attachment fstack-cni makes.
	TypeVhostUser = "vhost-user"
	// ModeServer means the pod's side (DPDK virtio_user with server=1) owns the socket.
	ModeServer = "server"
	// TempPattern matches the temp files of Write (TempFor); a writer killed mid-write leaves
	// one behind.
	TempPattern = ".devinfo-*"
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

// Read loads and validates the file at path.
func Read(path string) (*Info, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("devinfo: %w", err)
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("devinfo: %s: %w", path, err)
	}
	if err := info.Validate(); err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return &info, nil
}

// TempFor is the temp file Write uses for path. It is a fixed name, so whoever cleans up after a
// killed writer removes exactly it instead of scanning a directory that holds every pod's files.
func TempFor(path string) string {
	return filepath.Join(filepath.Dir(path), ".devinfo-"+filepath.Base(path)+".tmp")
}

// Write stores info at path atomically (temp file, rename), creating the parent directory, so a
// reader never sees half a file. Writes of the same path must not run concurrently (they share
// the temp file); fstack-cni makes them under its socket-root lock.
//
// There is deliberately no fsync: the files live under /var/run, a tmpfs on every node, so they
// cannot outlive a crash that an fsync would guard against; and after a crash of the node every
// sandbox is recreated and ADD writes them again. On a disk-backed /var/run a crash may leave a
// temp file or an empty file behind; the runtime's DEL of the dead sandbox removes both (the
// plugin treats an unreadable device info as the attachment's own). An fsync costs milliseconds
// on such a disk, a large part of an ADD.
func Write(path string, info *Info) error {
	data, err := Encode(info)
	if err != nil {
		return err
	}
	return WriteEncoded(path, data)
}

// Encode validates info and returns what Write stores, so a writer of the same document to
// several paths encodes it once.
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

// WriteEncoded is Write of a document Encode returned.
func WriteEncoded(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("devinfo: %w", err)
	}
	return writeAtomic(path, data)
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.OpenFile(TempFor(path), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("devinfo: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	// Chmod: the umask may have narrowed the mode, and the dataplane reads as another user.
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("devinfo: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("devinfo: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("devinfo: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("devinfo: %w", err)
	}
	return nil
}
