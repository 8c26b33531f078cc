// Package nodeconf is fstack-cni's node config: the node's own paths (OVSDB's socket, the socket
// root, the kubelet's root dir, the device-info directory, the log file), the namespaces whose
// pods the plugin serves, and the platform's data networks (each a DataNetwork's plan) with the
// node's default one. It is one root-owned file on the node, written by the CNI DaemonSet's
// installer from the chart's values (or by the node's administrator), never by a network
// config: fstack-cni runs as root on the host, and a NetworkAttachmentDefinition is written by
// whoever may write one in a tenant namespace, so any path it could name would be a write as
// root anywhere on the node, and any plan it could give would be the tenant's own.
package nodeconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/netplan"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Path is where fstack-cni reads the node config. /etc/kube-fstack, not the project's runtime
// directory /var/run/kube-fstack: /var/run is a tmpfs, so after a reboot pods the kubelet
// restarts before the DaemonSet would find no node config, and the installer would have to
// mount the socket root's parent (every pod's link) read-write to write there; a directory of
// its own in /etc is root's, survives reboots and is the only thing the installer mounts for it.
// Not the CNI conf dir: the runtime loads every *.json there as a network config.
const Path = "/etc/kube-fstack/cni.json"

// Defaults are the node's values when the node config does not set them (and, with no node
// config at all, what DEL, GC and STATUS use).
const (
	DefaultOVSDBSocket    = "/var/run/openvswitch/db.sock"
	DefaultSocketRoot     = podcontract.HostSocketRoot
	DefaultKubeletRootDir = "/var/lib/kubelet"
	DefaultDeviceInfoDir  = "/var/run/k8s.cni.cncf.io/devinfo/cni"
	DefaultLogFile        = "/var/log/kube-fstack/fstack-cni.log"
)

// MaxSize bounds the file: a few paths, a list of namespaces and the networks' plans.
const MaxSize = 1 << 20

// MaxNetworks bounds the networks one node config lists.
const MaxNetworks = 64

// Conf is the node config. Its JSON names are the network config's names of the same values,
// so an error can say which member of a network config to remove.
type Conf struct {
	OVSDBSocket    string `json:"ovsdbSocket,omitempty"`
	SocketRoot     string `json:"socketRoot,omitempty"`
	KubeletRootDir string `json:"kubeletRootDir,omitempty"`
	DeviceInfoDir  string `json:"deviceInfoDir,omitempty"`
	LogFile        string `json:"logFile,omitempty"`
	// Namespaces are the only namespaces whose pods ADD serves: the ones the injector serves
	// (labelled kubefstack.io/injection=enabled). Empty serves none.
	Namespaces []string `json:"namespaces,omitempty"`
	// Networks are the platform's data networks (each a DataNetwork's plan), to which ADD holds
	// every port: its addresses, VIPs, VLANs and MAC must be what the port's network grants the
	// pod's namespace. Empty: the node enforces no network plan (ADD warns).
	Networks []netplan.Spec `json:"networks,omitempty"`
	// DefaultNetwork is the network of a port whose binding names none (the operator's
	// --default-data-network); empty: such a port is refused when Networks are listed.
	DefaultNetwork string `json:"defaultNetwork,omitempty"`

	// parsed are Networks parsed, by name (Parse fills it).
	parsed map[string]*netplan.Network
}

// Default is the node config of a node that has none.
func Default() *Conf {
	c := &Conf{}
	c.applyDefaults()
	return c
}

// Field is one node value by its network-config name.
type Field struct {
	Name  string
	Value string
}

// Paths lists the node's paths by their network-config names.
func (c *Conf) Paths() []Field {
	return []Field{{"ovsdbSocket", c.OVSDBSocket}, {"socketRoot", c.SocketRoot}, {"kubeletRootDir", c.KubeletRootDir},
		{"deviceInfoDir", c.DeviceInfoDir}, {"logFile", c.LogFile}}
}

func (c *Conf) applyDefaults() {
	for _, d := range []struct {
		v   *string
		def string
	}{{&c.OVSDBSocket, DefaultOVSDBSocket}, {&c.SocketRoot, DefaultSocketRoot},
		{&c.KubeletRootDir, DefaultKubeletRootDir}, {&c.DeviceInfoDir, DefaultDeviceInfoDir}, {&c.LogFile, DefaultLogFile}} {
		if *d.v == "" {
			*d.v = d.def
		}
	}
}

// Validate checks what Parse accepts: every path absolute and clean, every namespace a
// Kubernetes namespace name, once, and the networks (checkNetworks).
func (c *Conf) Validate() error {
	for _, f := range c.Paths() {
		if !filepath.IsAbs(f.Value) || filepath.Clean(f.Value) != f.Value {
			return fmt.Errorf("%s %q must be a clean absolute path", f.Name, f.Value)
		}
	}
	for i, ns := range c.Namespaces {
		if !podcontract.IsDNSLabel(ns) {
			return fmt.Errorf("namespaces[%d] %q is not a namespace name (a DNS-1123 label)", i, ns)
		}
		if slices.Contains(c.Namespaces[:i], ns) {
			return fmt.Errorf("namespaces[%d] %q is listed twice", i, ns)
		}
	}
	_, err := c.checkNetworks()
	return err
}

// checkNetworks parses every network: a DataNetwork's name (a DNS-1123 label) once, a plan
// netplan.Parse accepts, grants naming namespaces by name; and the default one of them. Its
// errors name the member at fault.
func (c *Conf) checkNetworks() (map[string]*netplan.Network, error) {
	if len(c.Networks) > MaxNetworks {
		return nil, fmt.Errorf("networks: %d entries, at most %d", len(c.Networks), MaxNetworks)
	}
	parsed := make(map[string]*netplan.Network, len(c.Networks))
	for i, s := range c.Networks {
		switch {
		case !podcontract.IsDNSLabel(s.Name):
			return nil, fmt.Errorf("networks[%d].name %q is not a DataNetwork name (a DNS-1123 label)", i, s.Name)
		case parsed[s.Name] != nil:
			return nil, fmt.Errorf("networks[%d].name %q is listed twice", i, s.Name)
		}
		n, err := netplan.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("networks[%d] (%s): %w", i, s.Name, err)
		}
		for j, g := range s.Grants {
			for k, ns := range g.Namespaces {
				if !podcontract.IsDNSLabel(ns) {
					return nil, fmt.Errorf("networks[%d] (%s): grants[%d].namespaces[%d] %q is not a namespace name (a DNS-1123 label)", i, s.Name, j, k, ns)
				}
			}
		}
		parsed[s.Name] = n
	}
	if c.DefaultNetwork != "" && parsed[c.DefaultNetwork] == nil {
		return nil, fmt.Errorf("defaultNetwork %q is not one of the networks listed (%s)", c.DefaultNetwork, c.networkNames())
	}
	return parsed, nil
}

// Network is the parsed plan of the network named name, and whether the node config lists it.
func (c *Conf) Network(name string) (*netplan.Network, bool) {
	if c.parsed == nil {
		parsed, err := c.checkNetworks()
		if err != nil {
			return nil, false
		}
		c.parsed = parsed
	}
	n, ok := c.parsed[name]
	return n, ok
}

// EnforcesNetworks says whether the node holds ports to network plans: it lists networks.
func (c *Conf) EnforcesNetworks() bool { return len(c.Networks) > 0 }

// networkNames lists the networks' names, for messages.
func (c *Conf) networkNames() string {
	if len(c.Networks) == 0 {
		return "none"
	}
	names := make([]string, len(c.Networks))
	for i, s := range c.Networks {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// NetworkNames lists the networks' names, for messages ("none" when there are none).
func (c *Conf) NetworkNames() string { return c.networkNames() }

// Serves reports whether ADD serves pods of namespace ns.
func (c *Conf) Serves(ns string) bool {
	return ns != "" && slices.Contains(c.Namespaces, ns)
}

// Parse decodes a node config strictly (an unknown member is a mistake the node's admin must
// hear of), defaults and validates it.
func Parse(data []byte) (*Conf, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	c := &Conf{}
	if err := dec.Decode(c); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.parsed, _ = c.checkNetworks()
	return c, nil
}

// Encode is the file's content for c.
func (c *Conf) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	return append(b, '\n'), err
}

// ErrMissing is Load's error when there is no node config.
var ErrMissing = errors.New("no node config")

// Load reads the node config at path, which must be a regular file owned by uid owner (root on
// a node), writable by its owner only, in a directory of the same owner writable by its owner
// only: anyone else who could write either could name the paths a root process writes.
// Symlinks are not followed at the file. A missing file is ErrMissing.
func Load(path string, owner int) (*Conf, error) {
	dir, err := os.Open(filepath.Dir(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrMissing)
	}
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	if err := trusted(int(dir.Fd()), filepath.Dir(path), owner, unix.S_IFDIR); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(int(dir.Fd()), filepath.Base(path), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("%s: %w", path, ErrMissing)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := trusted(fd, path, owner, unix.S_IFREG); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxSize)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// trusted checks what fd is: of kind (S_IFREG, S_IFDIR), owned by owner, not writable by group
// or others.
func trusted(fd int, path string, owner int, kind uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	what := map[uint32]string{unix.S_IFREG: "a regular file", unix.S_IFDIR: "a directory"}[kind]
	switch {
	case st.Mode&unix.S_IFMT != kind:
		return fmt.Errorf("%s is not %s: refusing it as fstack-cni's node config; the CNI DaemonSet's installer writes it", path, what)
	case int(st.Uid) != owner:
		return fmt.Errorf("%s is owned by uid %d, not %d (root): refusing it as fstack-cni's node config; remove it, the CNI DaemonSet's installer writes it", path, st.Uid, owner)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s has mode %#o, writable by group or others: refusing it as fstack-cni's node config; chmod go-w it", path, st.Mode&0o7777)
	}
	return nil
}
